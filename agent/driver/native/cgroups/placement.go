package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Placement is what a process needs to start a child inside a task's
// cgroup. It is plain data (JSON-friendly), so the driver can hand it to
// the task shim in the shim's spec file.
type Placement struct {
	// Mode is ModeV2 or ModeV1.
	Mode Mode
	// Dirs are the cgroup's directories: one on v2, one per hierarchy on
	// v1.
	Dirs []string
	// Controllers and Mounts name, on v1, the controller and mount point
	// of each of Dirs' hierarchies, so the starting process finds its own
	// cgroup in each to return to.
	Controllers []string `json:",omitempty"`
	Mounts      []string `json:",omitempty"`
}

// Start starts cmd with its process inside the cgroup from its first
// instruction, so no moment exists where the task runs unlimited or a
// child it forks is left outside.
//
// On v2 the child is cloned straight into the cgroup (clone3 with
// CLONE_INTO_CGROUP, through SysProcAttr.UseCgroupFD; Linux 5.7 and
// later). On v1 no such clone flag exists: the calling thread (locked to
// its goroutine) joins the task's cgroup in every hierarchy, starts cmd
// (whose process inherits the forking thread's cgroups) and goes back to
// the cgroups it came from, found in /proc/thread-self/cgroup. Only that
// thread moves: the process's other threads, the children they fork and
// the threads the Go runtime starts meanwhile (it starts none from a
// locked thread) stay where they were. If the thread cannot go back, the
// started command is killed, an error returned, and the goroutine stays
// locked to the thread, which the runtime ends with the goroutine.
//
// The thread moves itself by writing "0" to each hierarchy's tasks file:
// the kernel migrates the writing thread without taking the cgroup
// threadgroup lock (cgroup_procs_write_start: a thread that is current
// cannot exit or exec under the migration), whose write side waits for an
// RCU grace period. Moving the whole process through cgroup.procs, or a
// thread by its ID, waits for one: 10-17 ms of each start at load 10 on a
// 2-core host (Linux 6.18), against 1.7-2.9 ms for this (a plain start:
// 1.1-1.3 ms).
func (p *Placement) Start(cmd *exec.Cmd) error {
	switch p.Mode {
	case ModeV2:
		if len(p.Dirs) != 1 {
			return fmt.Errorf("cgroup v2 placement with %d directories, want 1", len(p.Dirs))
		}
		return startInto(cmd, p.Dirs[0])
	case ModeV1:
		return p.startJoined(cmd)
	}
	return fmt.Errorf("%w: placement mode %q", ErrUnsupported, p.Mode)
}

// startJoined is Start on v1: the calling thread joins, starts, goes back.
func (p *Placement) startJoined(cmd *exec.Cmd) error {
	if len(p.Controllers) != len(p.Dirs) || len(p.Mounts) != len(p.Dirs) {
		return errors.New("cgroup v1 placement without a controller and mount for each directory")
	}
	runtime.LockOSThread()
	stuck := false
	defer func() {
		if !stuck {
			runtime.UnlockOSThread()
		}
	}()
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return fmt.Errorf("read own cgroups: %w", err)
	}
	own := ParseProcCgroup(b)
	back := make([]string, len(p.Dirs))
	for i, ctrl := range p.Controllers {
		rel, ok := own[ctrl]
		if !ok {
			return fmt.Errorf("this thread is in no cgroup of the v1 %s hierarchy", ctrl)
		}
		back[i] = filepath.Join(p.Mounts[i], rel)
		// Check the way back before leaving.
		if _, err := os.Stat(filepath.Join(back[i], "tasks")); err != nil {
			return fmt.Errorf("own %s cgroup %s, to return to after the start, not found: %w", ctrl, back[i], err)
		}
	}
	joined := 0
	leave := func() error {
		var first error
		for i := 0; i < joined; i++ {
			if err := writeValue(filepath.Join(back[i], "tasks"), "0"); err != nil && first == nil {
				first = err
			}
		}
		stuck = first != nil
		return first
	}
	for _, dir := range p.Dirs {
		if err := writeValue(filepath.Join(dir, "tasks"), "0"); err != nil {
			if lerr := leave(); lerr != nil {
				return fmt.Errorf("join task cgroup: %w (and going back failed: %v)", err, lerr)
			}
			return fmt.Errorf("join task cgroup: %w", err)
		}
		joined++
	}
	startErr := cmd.Start()
	leaveErr := leave()
	if startErr != nil {
		if leaveErr != nil {
			return fmt.Errorf("%w (and going back to own cgroups failed: %v)", startErr, leaveErr)
		}
		return startErr
	}
	if leaveErr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("task started, but the starting thread could not leave the task's cgroup, so the task was killed: %w", leaveErr)
	}
	return nil
}

// ParseProcCgroup reads /proc/<pid>/cgroup content ("id:controllers:path"
// lines, cgroups(7)) into a map from controller name to the process's
// cgroup path in that hierarchy. A v1 line lists its controllers
// separated by commas ("cpu,cpuacct", "name=systemd"); the v2 line ("0::")
// has the key "". Malformed lines are skipped.
func ParseProcCgroup(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || id == "" {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		if ctrls == "" {
			out[""] = path
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c != "" {
				out[c] = path
			}
		}
	}
	return out
}
