package artifacts

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// Limits of one unpacked archive.
const (
	// MaxTarEntries bounds the entries of one archive.
	MaxTarEntries = 100_000
	// DefaultMaxUnpackBytes bounds the bytes written by one archive (a
	// gzip bomb stops here): 16 GiB.
	DefaultMaxUnpackBytes = 16 << 30
)

// Place writes the verified blob r beneath the task directory taskRoot
// at the artifact's destination: in mode "dir" r is a tar (optionally
// gzipped) unpacked beneath it, in mode "file" r is written as one file
// (at the destination, or inside it when it is a directory, named for the
// source's last element). An empty mode unpacks a tar and writes any
// other bytes as a file. maxBytes bounds what is written (zero:
// DefaultMaxUnpackBytes).
//
// An archive is unpacked whole into a fresh directory beneath taskRoot
// first and moved into place only when every entry passed, so a refused
// archive leaves nothing at the destination. Refused, with an error
// wrapping ErrUnsafeEntry that names the entry: absolute paths, ".."
// elements, symlinks with an absolute target or one with "..", hard links
// to a path outside the archive, device nodes, FIFOs, sockets, setuid or
// setgid bits. All writes go through taskRoot (os.Root), so nothing is
// ever written outside the task directory whatever the archive holds.
func Place(taskRoot *os.Root, a *structs.TaskArtifact, r io.Reader, maxBytes int64) error {
	dest, err := a.Dest()
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxUnpackBytes
	}
	br := bufio.NewReaderSize(r, 4096)
	head, _ := br.Peek(512)
	gz := len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b
	isTar := len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar"))
	mode := a.GetterMode
	if mode == "" {
		mode = structs.ArtifactModeFile
		if isTar || gz && strings.Contains(a.GetterSource, ".tar") {
			mode = structs.ArtifactModeDir
		}
	}
	if mode == structs.ArtifactModeFile {
		return placeFile(taskRoot, dest, sourceBase(a), br, maxBytes)
	}
	var tr io.Reader = br
	if gz {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		tr = zr
	}
	return unpackTar(taskRoot, dest, tr, maxBytes)
}

// sourceBase is the file name a "file" artifact gets inside a directory.
func sourceBase(a *structs.TaskArtifact) string {
	s := a.GetterSource
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	b := path.Base(s)
	if b == "." || b == "/" || b == ".." || b == "" {
		return "artifact"
	}
	return b
}

// randomName returns a fresh name for a temporary entry.
func randomName(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func placeFile(root *os.Root, dest, base string, r io.Reader, max int64) error {
	if dir := path.Dir(dest); dir != "." {
		if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if fi, err := root.Lstat(filepath.FromSlash(dest)); err == nil && fi.IsDir() {
		dest = path.Join(dest, base)
	}
	tmp := path.Join(path.Dir(dest), randomName(".artifact-"))
	f, err := allocdir.CreateFresh(root, filepath.FromSlash(tmp), 0o644)
	if err != nil {
		return err
	}
	defer root.Remove(filepath.FromSlash(tmp))
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > max {
		return fmt.Errorf("%w: the file is over %d bytes", ErrTooLarge, max)
	}
	return root.Rename(filepath.FromSlash(tmp), filepath.FromSlash(dest))
}

// entryName checks a tar entry's name and returns it cleaned ("" for the
// archive's root).
func entryName(name string) (string, error) {
	if strings.ContainsRune(name, 0) || strings.Contains(name, "\\") {
		return "", fmt.Errorf("%w: entry %q: its name has a NUL or a backslash", ErrUnsafeEntry, name)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: entry %q: absolute path", ErrUnsafeEntry, name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: entry %q: a \"..\" element would leave the destination", ErrUnsafeEntry, name)
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// checkHeader refuses what is not a plain file, directory, or link that
// stays inside the archive.
func checkHeader(h *tar.Header, name string) error {
	if h.Mode&(0o4000|0o2000) != 0 {
		return fmt.Errorf("%w: entry %q: setuid or setgid bit (mode %o)", ErrUnsafeEntry, h.Name, h.Mode)
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir:
		return nil
	case tar.TypeSymlink:
		t := h.Linkname
		if t == "" || strings.HasPrefix(t, "/") || strings.ContainsRune(t, 0) {
			return fmt.Errorf("%w: entry %q: symlink to %q leaves the destination (absolute or empty target)", ErrUnsafeEntry, h.Name, t)
		}
		for _, el := range strings.Split(t, "/") {
			if el == ".." {
				return fmt.Errorf("%w: entry %q: symlink to %q may leave the destination (targets must not contain \"..\")", ErrUnsafeEntry, h.Name, t)
			}
		}
		return nil
	case tar.TypeLink:
		if _, err := entryName(h.Linkname); err != nil || h.Linkname == "" {
			return fmt.Errorf("%w: entry %q: hard link to %q outside the archive", ErrUnsafeEntry, h.Name, h.Linkname)
		}
		return nil
	case tar.TypeChar, tar.TypeBlock:
		return fmt.Errorf("%w: entry %q: device file", ErrUnsafeEntry, h.Name)
	case tar.TypeFifo:
		return fmt.Errorf("%w: entry %q: FIFO", ErrUnsafeEntry, h.Name)
	default:
		return fmt.Errorf("%w: entry %q: unsupported tar entry type %q", ErrUnsafeEntry, h.Name, string(h.Typeflag))
	}
}

// unpackTar unpacks r into a fresh directory beneath root, then moves it
// to dest.
func unpackTar(root *os.Root, dest string, r io.Reader, max int64) error {
	tmp := randomName(".artifact-")
	if err := root.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("create a staging directory: %w", err)
	}
	defer root.RemoveAll(tmp)
	troot, err := root.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer troot.Close()
	tr := tar.NewReader(r)
	var written int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if n >= MaxTarEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxTarEntries)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if err := checkHeader(h, name); err != nil {
			return err
		}
		if name == "" {
			continue
		}
		osName := filepath.FromSlash(name)
		if dir := path.Dir(name); dir != "." {
			if err := troot.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := troot.MkdirAll(osName, 0o755); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			_ = troot.Remove(osName)
			if err := troot.Symlink(h.Linkname, osName); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
		case tar.TypeLink:
			target, _ := entryName(h.Linkname)
			fi, err := troot.Lstat(filepath.FromSlash(target))
			if err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("%w: entry %q: hard link to %q, which is not a file earlier in the archive", ErrUnsafeEntry, h.Name, h.Linkname)
			}
			_ = troot.Remove(osName)
			if err := troot.Link(filepath.FromSlash(target), osName); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
		case tar.TypeReg:
			if written+h.Size > max {
				return fmt.Errorf("%w: the archive unpacks to more than %d bytes", ErrTooLarge, max)
			}
			perm := fs.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				perm = 0o755
			}
			f, err := allocdir.CreateFresh(troot, osName, perm)
			if err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			m, err := io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			written += m
		}
	}
	if err := root.MkdirAll(filepath.FromSlash(dest), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dest, err)
	}
	return moveInto(root, tmp, filepath.FromSlash(dest))
}

// moveInto moves every entry of the directory src into dst (both beneath
// root): new names are renamed in, directories present in both are
// merged, anything else at dst is replaced.
func moveInto(root *os.Root, src, dst string) error {
	sub, err := root.OpenRoot(src)
	if err != nil {
		return err
	}
	names, err := allocdir.Names(sub)
	sub.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		s, d := filepath.Join(src, n), filepath.Join(dst, n)
		sfi, err := root.Lstat(s)
		if err != nil {
			return err
		}
		dfi, err := root.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case dfi.IsDir() && sfi.IsDir():
			if err := moveInto(root, s, d); err != nil {
				return err
			}
			continue
		default:
			if err := root.RemoveAll(d); err != nil {
				return err
			}
		}
		if err := root.Rename(s, d); err != nil {
			return err
		}
	}
	return nil
}
