package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// Output limits per task, the defaults of the client's
// `client { outputs { max_files max_bytes } }`.
const (
	DefaultOutputMaxFiles = 1000
	DefaultOutputMaxBytes = 512 << 20
	// maxOutputDepth bounds how deep the output directory is walked.
	maxOutputDepth = 64
)

// OutputLimits bounds one task's outputs; zero fields get the defaults.
type OutputLimits struct {
	// MaxFiles is the most files; default DefaultOutputMaxFiles (1,000).
	MaxFiles int
	// MaxBytes is the most bytes all files together; default
	// DefaultOutputMaxBytes (512 MiB).
	MaxBytes int64
}

func (l OutputLimits) withDefaults() OutputLimits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultOutputMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultOutputMaxBytes
	}
	return l
}

// OutputFile is one collected output: Path slash-separated relative to
// the output directory, Digest its lower-case hex SHA-256, Size in bytes.
type OutputFile struct {
	Path   string
	Digest string
	Size   int64
}

// CollectOutputs walks the output directory root (an os.Root, so nothing
// outside it is reached), hashing every regular file with one link.
// Symlinks, hard-linked files, devices, FIFOs and sockets are not
// followed nor read; their paths come back in skipped. Files are in
// path order. Over a limit it returns an error wrapping ErrTooLarge
// and no files: the caller records none.
func CollectOutputs(root *os.Root, lim OutputLimits) (files []OutputFile, skipped []string, err error) {
	lim = lim.withDefaults()
	var total int64
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > maxOutputDepth {
			return fmt.Errorf("%w: %s is nested more than %d directories deep", ErrTooLarge, dir, maxOutputDepth)
		}
		d, err := root.Open(filepath.FromSlash(dir))
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, n := range names {
			rel := path.Join(dir, n)
			fi, err := root.Lstat(filepath.FromSlash(rel))
			if err != nil {
				return err
			}
			switch {
			case fi.IsDir():
				if err := walk(rel, depth+1); err != nil {
					return err
				}
				continue
			case !fi.Mode().IsRegular():
				skipped = append(skipped, rel+" ("+fi.Mode().Type().String()+")")
				continue
			}
			if len(files) >= lim.MaxFiles {
				return fmt.Errorf("%w: more than %d output files (client outputs max_files)", ErrTooLarge, lim.MaxFiles)
			}
			if total+fi.Size() > lim.MaxBytes {
				return fmt.Errorf("%w: outputs are over %d bytes (client outputs max_bytes); %s alone is %d bytes", ErrTooLarge, lim.MaxBytes, rel, fi.Size())
			}
			f, err := openOutput(root, rel)
			if err != nil {
				skipped = append(skipped, rel+" ("+err.Error()+")")
				continue
			}
			h := sha256.New()
			n, err := io.Copy(h, io.LimitReader(f, lim.MaxBytes-total+1))
			f.Close()
			if err != nil {
				return fmt.Errorf("read %s: %w", rel, err)
			}
			if total+n > lim.MaxBytes {
				return fmt.Errorf("%w: outputs are over %d bytes (client outputs max_bytes)", ErrTooLarge, lim.MaxBytes)
			}
			total += n
			files = append(files, OutputFile{Path: rel, Digest: hex.EncodeToString(h.Sum(nil)), Size: n})
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return nil, skipped, err
	}
	for i := range files {
		files[i].Path = path.Clean(files[i].Path)
	}
	return files, skipped, nil
}

// openOutput opens a file the task wrote: no symlink followed (O_NOFOLLOW
// on top of os.Root), no blocking on a FIFO swapped in, and on the
// descriptor a regular file with one link (a hard link to a host file
// has two or more). The owner is the task's user, so it is not checked.
func openOutput(root *os.Root, rel string) (*os.File, error) {
	f, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: not a regular file", ErrUnsafeEntry)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		f.Close()
		return nil, fmt.Errorf("%w: %d hard links", ErrUnsafeEntry, st.Nlink)
	}
	return f, nil
}

// UploadOutputs asks the store which of the files' digests it lacks and
// uploads those, each read again from root (the store checks the digest,
// so a file changed since it was hashed fails the upload). jobID and
// allocID are recorded as the blobs' references.
func UploadOutputs(ctx context.Context, store Store, root *os.Root, files []OutputFile, jobID, allocID string) error {
	if len(files) == 0 {
		return nil
	}
	if store == nil {
		return ErrNoStore
	}
	seen := map[string]OutputFile{}
	var digests []string
	for _, f := range files {
		if _, ok := seen[f.Digest]; !ok {
			seen[f.Digest] = f
			digests = append(digests, f.Digest)
		}
	}
	missing, err := store.Missing(ctx, digests)
	if err != nil {
		return fmt.Errorf("ask which outputs the servers lack: %w", err)
	}
	for _, d := range missing {
		of, ok := seen[d]
		if !ok {
			continue
		}
		err := retryPut(ctx, func() error {
			f, err := openOutput(root, of.Path)
			if err != nil {
				return fmt.Errorf("open %s: %w", of.Path, err)
			}
			defer f.Close()
			return store.Put(ctx, d, io.LimitReader(f, of.Size), of.Size, MediaTypeFile, jobID, allocID)
		})
		if err != nil {
			return fmt.Errorf("upload %s: %w", of.Path, err)
		}
	}
	return nil
}

// putAttempts is how often one blob upload is tried: a server that fails
// mid-stream is skipped by the next attempt (the connection rotates).
const putAttempts = 3

// retryPut calls put up to putAttempts times while it fails and ctx
// lasts, waiting 200 ms, then 400 ms between attempts.
func retryPut(ctx context.Context, put func() error) error {
	var err error
	for i := 0; i < putAttempts; i++ {
		if err = put(); err == nil || ctx.Err() != nil {
			return err
		}
		if i+1 < putAttempts {
			t := time.NewTimer(time.Duration(200<<i) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return err
			}
		}
	}
	return err
}
