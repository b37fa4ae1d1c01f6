package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Docker resolves a bind mount's source path again when it starts the
// container, after the driver checked it. Whoever can rename an entry on
// that path in between (mv local local.d && ln -s /victim local) decides
// what the container gets, a host directory included. A path is stable
// only when every directory whose entries lead to the source, from the
// allocation directory down
// to the source's parent, is a real directory that no task can write:
// owned by the agent's uid (or root) and not writable by group or others.
// A native task running as another user owns its task directory (the
// driver chowns <task>, local, secrets and outputs to it), so a source
// below such a directory is refused; the allocation directory itself, a
// docker task's own <task>/local and the agent's directories are stable.

// errNoPin is wrapped by pinMounts' error when this host cannot pin
// mount sources (the agent may not bind-mount): the driver then hands
// Docker the checked paths.
var errNoPin = errors.New("mount sources cannot be pinned on this host")

// errUnstableMount is the reason a mount source is refused: the
// directory on its path that a task could change, and what to mount
// instead.
type errUnstableMount struct {
	dir    string
	reason string
}

func (e *errUnstableMount) Error() string {
	return fmt.Sprintf("the directory %s on its path %s, so a task could swap the path for a symlink before Docker mounts it; mount the allocation directory itself, a docker task's own directory (<task>/local) or another directory whose parents are the agent's, not a directory a native task running as another user owns", e.dir, e.reason)
}

// stablePath checks that the resolved path abs, at or below the resolved
// directory start, cannot be changed by a task: start and every directory
// below it down to abs's parent must be real directories owned by the
// agent's effective uid or root and not writable by group or others, and
// abs itself must not be a symlink. It returns an *errUnstableMount
// naming the first directory that fails, an error saying which entry
// does not exist, or the lstat error.
func stablePath(start, abs string) error {
	rel, err := filepath.Rel(start, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is not below %s", abs, start)
	}
	dir := start
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if rel == "." {
		// The start itself: its entry lives above it, in a directory
		// the agent (allocs, mode 0711) or the operator controls.
		return nil
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i, part := range parts {
		next := filepath.Join(dir, part)
		nfi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist (Docker bind-mounts only an existing path)", next)
		}
		if err != nil {
			return err
		}
		if err := stableDir(dir, fi); err != nil {
			return err
		}
		if nfi.Mode()&fs.ModeSymlink != 0 {
			return &errUnstableMount{dir: next, reason: "is a symlink"}
		}
		if i < len(parts)-1 && !nfi.IsDir() {
			return &errUnstableMount{dir: next, reason: "is not a directory"}
		}
		dir, fi = next, nfi
	}
	return nil
}

// stableDir checks one directory dir (fi its lstat) on a mount source's
// path.
func stableDir(dir string, fi fs.FileInfo) error {
	if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
		return &errUnstableMount{dir: dir, reason: "is not a directory"}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if !trustedUID(st.Uid) {
		return &errUnstableMount{dir: dir, reason: fmt.Sprintf("is owned by uid %d, not the agent's uid %d", st.Uid, os.Geteuid())}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &errUnstableMount{dir: dir, reason: fmt.Sprintf("is writable by group or others (mode %s)", fi.Mode().Perm())}
	}
	return nil
}

// trustedUID reports whether a directory owned by uid is beyond a task's
// reach: the agent's own, or root's (which the agent, or the host's
// administrator, made).
func trustedUID(uid uint32) bool {
	return uid == 0 || int(uid) == os.Geteuid()
}
