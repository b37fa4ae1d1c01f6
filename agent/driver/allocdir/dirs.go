package allocdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirFlags open a directory to change its owner or mode through the
// descriptor: O_NOFOLLOW refuses a symlink in the last component,
// O_DIRECTORY anything but a directory (a hard link to a host file, a
// FIFO, a device node), O_NONBLOCK keeps a planted FIFO from stalling.
// A directory cannot be hard-linked, so an open that succeeds is the
// directory itself, not another name for a host file.
const dirFlags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// OpenDir opens rel, a slash-separated path beneath allocDir ("" or "."
// for allocDir itself), as a directory, one component at a time with
// openat(O_DIRECTORY|O_NOFOLLOW). Unlike os.Root, which follows a symlink
// that stays beneath its root, it follows no symlink at all below
// allocDir: a task that replaced local/ with a symlink to "..", to a
// sibling task's directory or to a host directory gets an error. allocDir
// itself is opened by path and must not be a symlink.
//
// Errors: one wrapping ErrUnsafe (and ENOTDIR or ELOOP) for a component
// that is a symlink or not a directory, one wrapping fs.ErrNotExist for a
// missing one, and one naming rel for a ".." or empty component. The
// caller closes the file.
func OpenDir(allocDir, rel string) (*os.File, error) {
	rel = strings.Trim(filepath.ToSlash(rel), "/")
	var parts []string
	if rel != "" && rel != "." {
		parts = strings.Split(rel, "/")
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, fmt.Errorf("open directory %q beneath the allocation directory %s: the path has a %q component", rel, allocDir, p)
		}
	}
	fd, err := openDirAt(-1, allocDir)
	if err != nil {
		return nil, dirError(allocDir, err)
	}
	cur := allocDir
	for _, p := range parts {
		next, err := openDirAt(fd, p)
		unix.Close(fd)
		cur = filepath.Join(cur, p)
		if err != nil {
			return nil, dirError(cur, err)
		}
		fd = next
	}
	f := os.NewFile(uintptr(fd), cur)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a directory (mode %s)", ErrUnsafe, cur, fi.Mode())
	}
	return f, nil
}

// openDirAt opens name in the directory dirfd, or name as a path (from
// the working directory) when dirfd is -1.
func openDirAt(dirfd int, name string) (int, error) {
	for {
		if dirfd < 0 {
			dirfd = unix.AT_FDCWD
		}
		fd, err := unix.Openat(dirfd, name, dirFlags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// dirError names path and, for a symlink or a non-directory, wraps
// ErrUnsafe besides the errno.
func dirError(path string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%w: %s is a symlink or not a directory: %w", ErrUnsafe, path, err)
	}
	return &fs.PathError{Op: "open directory", Path: path, Err: err}
}

// ChownDir gives the directory rel beneath allocDir (opened by OpenDir, so
// never through a symlink or a hard link) to uid and gid, changing the
// descriptor (fchown), not a path a task could swap meanwhile. Errors are
// OpenDir's and fchown's.
func ChownDir(allocDir, rel string, uid, gid int) error {
	f, err := OpenDir(allocDir, rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chown(uid, gid)
}

// ChmodDir sets the mode (permission, setgid and sticky bits) of the
// directory rel beneath allocDir through its descriptor (fchmod), as
// ChownDir does.
func ChmodDir(allocDir, rel string, mode fs.FileMode) error {
	f, err := OpenDir(allocDir, rel)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}
