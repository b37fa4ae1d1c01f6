package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pinMounts closes the window between the driver's check of a mount
// source inside the allocation directory and Docker's resolution of the
// path at start, against a task that can rename anything there (a docker
// task is root in its container, with the allocation directory at
// /alloc): each such source is opened beneath the allocation directory
// (os.Root: a symlink out of it fails) with O_PATH, the descriptor is
// bind-mounted (mount --bind /proc/self/fd/N) onto a fresh entry of a
// staging directory beside the allocation directory, in the agent's
// allocs directory that no task reaches, and Docker is given that entry:
// it mounts the object the driver opened, whatever happened to the path.
// release unmounts (MNT_DETACH) and removes the staging entries; the
// caller runs it once the container started (or failed to): the
// container keeps its own mount.
//
// Bind mounts need root (CAP_SYS_ADMIN); an agent that is not root gets
// the mounts back unchanged and relies on stablePath alone (tasks of
// another user cannot change the path), and one whose mount is refused
// (EPERM, e.g. root in a container without CAP_SYS_ADMIN) gets an error
// wrapping errNoPin, on which the caller uses the mounts unchanged. It
// returns the mounts with the staged sources, or an error naming the
// mount when a source cannot be opened beneath the allocation directory
// or is neither a directory nor a regular file.
func pinMounts(allocDir string, mounts []mountSpec) ([]mountSpec, func(), error) {
	release := func() {}
	need := false
	for _, m := range mounts {
		need = need || m.InAlloc
	}
	if !need || os.Geteuid() != 0 {
		return mounts, release, nil
	}
	root := resolvedDir(allocDir)
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, release, err
	}
	defer r.Close()
	sweepStages(filepath.Dir(root))
	stage, err := os.MkdirTemp(filepath.Dir(root), stagePrefix)
	if err != nil {
		return nil, release, fmt.Errorf("create the staging directory for the task's mounts: %w", err)
	}
	var staged []string
	release = func() {
		for _, p := range staged {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
			_ = os.Remove(p)
		}
		_ = os.Remove(stage)
	}
	out := make([]mountSpec, len(mounts))
	copy(out, mounts)
	for i, m := range mounts {
		if !m.InAlloc {
			continue
		}
		p, err := pinOne(r, root, m.Source, filepath.Join(stage, strconv.Itoa(i)))
		if p != "" {
			staged = append(staged, p)
		}
		if err != nil {
			release()
			return nil, func() {}, fmt.Errorf("key \"mounts\": mount %s (element %d): %w", m.Source, i, err)
		}
		out[i].Source = p
	}
	return out, release, nil
}

// stagePrefix names the staging directories pinMounts makes in the
// allocs directory.
const stagePrefix = ".docker-mounts-"

// staleStage is the age past which a staging directory is left from an
// agent that died between pinning and release: a start holds one for its
// create and start calls only (DefaultAPITimeout each).
const staleStage = 10 * time.Minute

// sweepStages unmounts (MNT_DETACH) and removes the staging directories in
// allocs older than staleStage. It removes names only (os.Remove), never
// what a mount shows.
func sweepStages(allocs string) {
	dirs, _ := filepath.Glob(filepath.Join(allocs, stagePrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < staleStage {
			continue
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
			_ = os.Remove(p)
		}
		_ = os.Remove(dir)
	}
}

// pinOne opens abs beneath r (the allocation directory root, resolved)
// and bind-mounts it onto at. It returns at whenever it created it (for
// release to remove), on error too.
func pinOne(r *os.Root, root, abs, at string) (string, error) {
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return "", err
	}
	f, err := r.OpenFile(rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open it beneath the allocation directory: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	switch {
	case fi.IsDir():
		err = os.Mkdir(at, 0o700)
	case fi.Mode().IsRegular():
		var g *os.File
		if g, err = os.OpenFile(at, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			err = g.Close()
		}
	default:
		return "", fmt.Errorf("it is neither a directory nor a regular file (mode %s)", fi.Mode())
	}
	if err != nil {
		return "", err
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := syscall.Mount(src, at, "", syscall.MS_BIND, ""); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			return at, fmt.Errorf("%w: %w", errNoPin, err)
		}
		return at, fmt.Errorf("bind-mount it for Docker: %w", err)
	}
	return at, nil
}
