// Package allocdir opens the files the agent reads and writes inside an
// allocation directory (<data-dir>/client/allocs/<alloc-id>) beneath that
// directory, whatever the tasks did to it.
//
// A task controls its allocation directory: a native task running as the
// agent's user, or a docker task (root in its container, with the
// directory mounted at /alloc), can replace any file or directory in it
// with a symlink, a hard link, a FIFO or a device node. The agent often
// runs as root, so a path opened naively there could read /etc/shadow back
// through the logs API or overwrite a host file on the next log rotation.
// Every access here therefore:
//
//   - resolves beneath the allocation directory with os.Root (openat with
//     O_NOFOLLOW on each component: a symlink that leaves the root fails),
//     anchored at a directory opened from a path the agent made and the
//     task cannot change (the allocs directory is the agent's, mode 0711);
//   - opens with O_NONBLOCK, so a planted FIFO cannot stall the agent;
//   - after the open, checks on the descriptor (fstat, so no race) that the
//     file is a regular file with exactly one link, owned by the agent's
//     effective uid: a hard link to a host file has two links or more, and
//     a file the task made is the task's, not the agent's (when the task
//     runs as another user).
//
// A file that fails the check is refused with an error wrapping ErrUnsafe;
// writers then remove the name (Root.Remove removes the link, never its
// target) and create a fresh file with O_CREATE|O_EXCL.
package allocdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// ErrUnsafe is wrapped by the error for a file in an allocation directory
// the agent refuses to use: not a regular file, more than one hard link,
// or owned by another user than the agent's.
var ErrUnsafe = errors.New("refused a file a task may have planted")

// openFlags are added to every open: no blocking on a FIFO, no descriptor
// leaked into children.
const openFlags = syscall.O_NONBLOCK | syscall.O_CLOEXEC

// OpenRoot opens rel, a slash-separated path beneath the allocation
// directory allocDir (such as "web/logs", or "" for allocDir itself), as an
// os.Root. allocDir itself is opened by path: it and its parents must be
// directories only the agent can change. A symlink in rel that leaves
// allocDir fails with an error; the caller closes the Root.
func OpenRoot(allocDir, rel string) (*os.Root, error) {
	r, err := os.OpenRoot(allocDir)
	if err != nil {
		return nil, err
	}
	if rel == "" || rel == "." {
		return r, nil
	}
	defer r.Close()
	sub, err := r.OpenRoot(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("open %s beneath the allocation directory %s: %w", rel, allocDir, err)
	}
	return sub, nil
}

// MkdirAll creates rel and its missing parents beneath allocDir with perm
// (existing directories keep their mode). A component that is a symlink
// leaving allocDir fails.
func MkdirAll(allocDir, rel string, perm fs.FileMode) error {
	r, err := os.OpenRoot(allocDir)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.MkdirAll(filepath.FromSlash(rel), perm); err != nil {
		return fmt.Errorf("create %s beneath the allocation directory %s: %w", rel, allocDir, err)
	}
	return nil
}

// check refuses what is not a regular file with one link owned by the
// agent's effective uid.
func check(fi fs.FileInfo, name string) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (mode %s)", ErrUnsafe, name, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Nlink != 1 {
		return fmt.Errorf("%w: %s has %d hard links (a log or state file has exactly 1)", ErrUnsafe, name, st.Nlink)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s is owned by uid %d, not the agent's uid %d", ErrUnsafe, name, st.Uid, os.Geteuid())
	}
	return nil
}

// open opens name in r with flag and checks the file before (lstat, so a
// device node or FIFO is never opened by a blocking or side-effecting
// open) and after (fstat on the descriptor, which no rename can change).
func open(r *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	if flag&os.O_EXCL == 0 {
		fi, err := r.Lstat(name)
		if err != nil {
			if flag&os.O_CREATE == 0 || !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		} else if err := check(fi, name); err != nil {
			// A symlink too: the agent never makes one here.
			return nil, err
		}
	}
	f, err := r.OpenFile(name, flag|openFlags, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := check(fi, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenRead opens name in r for reading. It returns an error wrapping
// fs.ErrNotExist when there is none, and one wrapping ErrUnsafe for a
// file that fails the package's checks.
func OpenRead(r *os.Root, name string) (*os.File, error) {
	return open(r, name, os.O_RDONLY, 0)
}

// OpenAppend opens an existing file name in r for appending, checked as
// OpenRead is. It never creates the file.
func OpenAppend(r *os.Root, name string) (*os.File, error) {
	return open(r, name, os.O_WRONLY|os.O_APPEND, 0)
}

// CreateFresh creates name in r with perm and O_EXCL, for writing. A name
// that already exists (a file left by an earlier run, or a symlink, hard
// link or FIFO a task planted there) is removed first: Root.Remove
// removes the name, never what it points to.
func CreateFresh(r *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := r.OpenFile(name, flag|openFlags, perm)
	if errors.Is(err, fs.ErrExist) {
		if rerr := r.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove %s to create it afresh: %w", name, rerr)
		}
		f, err = r.OpenFile(name, flag|openFlags, perm)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// OpenOrCreateAppend opens name in r for appending when it exists and
// passes the checks, and otherwise (missing, or refused) creates it afresh
// with CreateFresh. It reports whether the file is new.
func OpenOrCreateAppend(r *os.Root, name string, perm fs.FileMode) (*os.File, bool, error) {
	f, err := OpenAppend(r, name)
	if err == nil {
		return f, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrUnsafe) && !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENXIO) {
		return nil, false, err
	}
	f, err = CreateFresh(r, name, perm)
	if err != nil {
		return nil, false, err
	}
	return f, true, nil
}

// ReadFile reads name in r, checked as OpenRead is, up to max bytes; a
// longer file is an error.
func ReadFile(r *os.Root, name string, max int64) ([]byte, error) {
	f, err := OpenRead(r, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", name, max)
	}
	return b, nil
}

// WriteFile writes data to name in r through a fresh temporary file
// (CreateFresh) and a rename, so a reader sees the whole file or none;
// with durable the data is fsynced first. The rename replaces whatever
// the name was (a planted symlink included) without following it.
func WriteFile(r *os.Root, name string, data []byte, perm fs.FileMode, durable bool) error {
	tmp := name + ".tmp"
	f, err := CreateFresh(r, tmp, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return r.Rename(tmp, name)
}

// Names returns the names in the directory r, sorted. A directory that is
// gone gives none.
func Names(r *os.Root) ([]string, error) {
	d, err := r.Open(".")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// Rel returns path, an absolute path below allocDir, relative to it with
// slashes. A path outside allocDir returns an error.
func Rel(allocDir, path string) (string, error) {
	rel, err := filepath.Rel(filepath.Clean(allocDir), filepath.Clean(path))
	if err != nil || rel == ".." || filepath.IsAbs(rel) || len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator) {
		return "", fmt.Errorf("%s is not inside the allocation directory %s", path, allocDir)
	}
	return filepath.ToSlash(rel), nil
}

// OpenBeneath is OpenRoot for path, an absolute path below allocDir.
func OpenBeneath(allocDir, path string) (*os.Root, error) {
	rel, err := Rel(allocDir, path)
	if err != nil {
		return nil, err
	}
	return OpenRoot(allocDir, rel)
}
