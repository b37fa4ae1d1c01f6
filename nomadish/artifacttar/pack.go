// Package artifacttar packs a directory into the deterministic tar that
// a directory artifact is: the same tree always gives the same bytes, so
// the same digest (and a re-run that writes the same files stores them
// once).
//
// The tar holds the directory's entries in lexical order of their
// slash-separated paths as fs.WalkDir visits them (each directory before
// its contents), each with mtime 0 (1970-01-01), uid and gid 0, no user
// or group names, mode 0755 for directories and executable files and 0644
// for other files. Symbolic links, devices, pipes, sockets and other
// non-regular files are refused (an error naming the path), so an
// unpacker never has to decide where a link points.
package artifacttar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// ErrUnsupported is wrapped by Pack's error for an entry that is not a
// directory or a regular file.
var ErrUnsupported = errors.New("not a regular file or directory")

// epoch is every entry's modification time.
var epoch = time.Unix(0, 0).UTC()

// Pack writes the deterministic tar of the tree at dir to w. It reads the
// tree through an os.Root, so no link can lead it outside dir. It returns
// an error wrapping ErrUnsupported for a symlink or special file, and the
// file system's and w's errors; a file that changes size while it is read
// is an error too.
func Pack(dir string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
		case d.Type().IsRegular():
			return packFile(root, tw, p)
		default:
			return fmt.Errorf("%s: %w (type %s)", p, ErrUnsupported, d.Type())
		}
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return tw.Close()
}

func packFile(root *os.Root, tw *tar.Writer, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (it changed while packing)", p, ErrUnsupported)
	}
	mode := int64(0o644)
	if st.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: st.Size(), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, st.Size()))
	if err != nil {
		return err
	}
	if n != st.Size() {
		return fmt.Errorf("%s: shrank from %d to %d bytes while packing", p, st.Size(), n)
	}
	return nil
}
