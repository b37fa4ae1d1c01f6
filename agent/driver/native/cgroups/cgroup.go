package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillTimeout bounds how long Kill and Destroy wait for the processes of
// a cgroup to be gone after SIGKILL.
const KillTimeout = 10 * time.Second

// pollInterval is how often Kill and Destroy look again at a cgroup that
// still holds processes.
const pollInterval = 10 * time.Millisecond

// Cgroup is one task's cgroup: one directory on v2, one per hierarchy on
// v1. Its methods are safe for concurrent use.
type Cgroup struct {
	mode   Mode
	taskID string
	// dirs are the cgroup's directories; on v1 in the manager's hierarchy
	// order (memory first), with controllers and mounts beside them.
	dirs        []string
	controllers []string
	mounts      []string
	// memory is whether the memory controller is there (OOM, usage).
	memory bool
	// cpuTime is the file of the cgroup's cumulative CPU time: cpu.stat on
	// v2 (usage_usec), cpuacct.usage on v1 (ns); empty when none.
	cpuTime string
	rmdir   func(string) error
}

// task returns the Cgroup of taskID, without touching the file system.
func (m *Manager) task(taskID string) (*Cgroup, error) {
	if m.mode == ModeNone {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, m.reason)
	}
	name, err := Name(taskID)
	if err != nil {
		return nil, err
	}
	c := &Cgroup{mode: m.mode, taskID: taskID, rmdir: m.rmdir}
	if m.mode == ModeV2 {
		dir := filepath.Join(m.v2, name)
		c.dirs = []string{dir}
		c.memory = !m.placementOnly
		c.cpuTime = filepath.Join(dir, "cpu.stat")
		return c, nil
	}
	for _, h := range m.v1 {
		dir := filepath.Join(h.Parent, name)
		c.dirs = append(c.dirs, dir)
		c.controllers = append(c.controllers, h.Controller)
		c.mounts = append(c.mounts, h.Mount)
		switch h.Controller {
		case "memory":
			c.memory = true
		case "cpu", "cpuacct":
			if _, err := os.Stat(filepath.Join(h.Mount, "cpuacct.usage")); err == nil {
				c.cpuTime = filepath.Join(dir, "cpuacct.usage")
			}
		}
	}
	return c, nil
}

// Create makes taskID's cgroup and sets its limits. A cgroup left by an
// earlier run of the same task ID (an agent that died before destroying
// it) is emptied with SIGKILL and made again, so no counter (OOM kills)
// carries over. It returns ErrUnsupported in ModeNone, ErrInvalidName for
// a bad ID, ErrNoController for limits on a placement-only manager, and
// the file system's error, naming the file, when a directory or limit
// cannot be written; a failed Create leaves nothing behind.
func (m *Manager) Create(taskID string, l Limits) (*Cgroup, error) {
	c, err := m.task(taskID)
	if err != nil {
		return nil, err
	}
	if m.placementOnly && l != (Limits{}) {
		return nil, fmt.Errorf("%w: limits asked of a manager without the cpu and memory controllers", ErrNoController)
	}
	for _, dir := range c.dirs {
		if _, err := os.Stat(dir); err == nil {
			m.logger.Warn("removing the stale cgroup of an earlier run of the task", "task_id", taskID, "path", dir)
			if err := c.Destroy(); err != nil {
				return nil, fmt.Errorf("remove stale cgroup of task %s: %w", taskID, err)
			}
			break
		}
	}
	for i, dir := range c.dirs {
		if err := m.mkdir(dir); err != nil {
			_ = c.Destroy()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if m.mode == ModeV2 {
			err = setV2(dir, l)
		} else {
			err = setV1(c.controllers[i], dir, l)
		}
		if err != nil {
			_ = c.Destroy()
			return nil, fmt.Errorf("set limits of task %s: %w", taskID, err)
		}
	}
	m.logger.Debug("task cgroup created", "task_id", taskID, "path", c.dirs[0], "memory_bytes", l.MemoryBytes,
		"cpu_shares", l.CPUShares, "cpu_quota_us", l.CPUQuota)
	return c, nil
}

// Open returns the cgroup Create made for taskID, for a task found again
// after an agent restart. It returns ErrUnsupported in ModeNone,
// ErrInvalidName for a bad ID and ErrNotFound (also matching
// fs.ErrNotExist) when the task has no cgroup.
func (m *Manager) Open(taskID string) (*Cgroup, error) {
	c, err := m.task(taskID)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(c.dirs[0]); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, c.dirs[0], err)
	}
	return c, nil
}

// Path returns the cgroup's directory (on v1, the one in the memory
// hierarchy).
func (c *Cgroup) Path() string { return c.dirs[0] }

// Mode returns the cgroup's mode, ModeV2 or ModeV1.
func (c *Cgroup) Mode() Mode { return c.mode }

// Placement returns what a process needs to start its child inside this
// cgroup (see Placement.Start).
func (c *Cgroup) Placement() *Placement {
	return &Placement{Mode: c.mode, Dirs: append([]string(nil), c.dirs...),
		Controllers: append([]string(nil), c.controllers...), Mounts: append([]string(nil), c.mounts...)}
}

// AddPID moves process pid into the cgroup (every directory on v1). A
// process started outside the cgroup runs unlimited until then; use
// Placement.Start where that matters.
func (c *Cgroup) AddPID(pid int) error {
	for _, dir := range c.dirs {
		if err := writeValue(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Procs returns the pids of the processes in the cgroup. A cgroup that is
// gone has none.
func (c *Cgroup) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.dirs[0], "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Kill sends SIGKILL to every process in the cgroup, including those that
// left the task's process group or session, and returns once none is
// left. On v2 it writes "1" to cgroup.kill where the kernel has it (5.14
// and later), which kills them all at once, forks in flight included;
// otherwise it reads cgroup.procs and kills each pid again and again until
// the list is empty (a process forked meanwhile is in the cgroup too and
// is found on the next read). It returns ErrBusy when processes are left
// after KillTimeout. A cgroup that is gone is not an error.
func (c *Cgroup) Kill() error {
	if c.mode == ModeV2 {
		if err := writeIfExists(filepath.Join(c.dirs[0], "cgroup.kill"), "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kill cgroup %s: %w", c.dirs[0], err)
		}
	}
	deadline := time.Now().Add(KillTimeout)
	for {
		pids, err := c.Procs()
		if err != nil {
			return fmt.Errorf("list processes of cgroup %s: %w", c.dirs[0], err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s holds %v %s after SIGKILL", ErrBusy, c.dirs[0], pids, KillTimeout)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill pid %d of cgroup %s: %w", pid, c.dirs[0], err)
			}
		}
		time.Sleep(pollInterval)
	}
}

// Destroy kills whatever is left in the cgroup (see Kill) and removes its
// directories. Removing a cgroup that is gone is not an error, so Destroy
// may be called again. It returns ErrBusy when processes are left after
// KillTimeout, or the error of the rmdir.
func (c *Cgroup) Destroy() error {
	if err := c.Kill(); err != nil {
		return err
	}
	deadline := time.Now().Add(KillTimeout)
	for i := len(c.dirs) - 1; i >= 0; i-- {
		for {
			err := c.rmdir(c.dirs[i])
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			// A process that exited is unlinked from its cgroup a moment
			// after it is gone from cgroup.procs.
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", c.dirs[i], err)
			}
			time.Sleep(pollInterval)
		}
	}
	return nil
}

// OOMKilled reports whether the kernel's OOM killer killed a process of
// the cgroup because it reached its memory limit: on v2 the oom_kill
// count of memory.events; on v1 the oom_kill count of memory.oom_control
// (kernel 4.13 and later), or else a non-zero memory.failcnt (the limit
// was hit). It reports false without the memory controller.
func (c *Cgroup) OOMKilled() (bool, error) {
	if !c.memory {
		return false, nil
	}
	if c.mode == ModeV2 {
		n, ok, err := readKey(filepath.Join(c.dirs[0], "memory.events"), "oom_kill")
		return ok && n > 0, err
	}
	n, ok, err := readKey(filepath.Join(c.dirs[0], "memory.oom_control"), "oom_kill")
	if err != nil || ok {
		return n > 0, err
	}
	fail, err := readInt(filepath.Join(c.dirs[0], "memory.failcnt"))
	return fail > 0, err
}

// MemoryUsage returns the memory the cgroup's processes use now, in
// bytes (v2 memory.current, v1 memory.usage_in_bytes; page cache
// included). It returns ErrNoController without the memory controller.
func (c *Cgroup) MemoryUsage() (uint64, error) {
	if !c.memory {
		return 0, ErrNoController
	}
	file := "memory.current"
	if c.mode == ModeV1 {
		file = "memory.usage_in_bytes"
	}
	return readInt(filepath.Join(c.dirs[0], file))
}

// CPUUsage returns the CPU time the cgroup's processes used so far, user
// and system together (v2 usage_usec of cpu.stat, v1 cpuacct.usage). It
// returns ErrNoController on v1 without a cpuacct hierarchy.
func (c *Cgroup) CPUUsage() (time.Duration, error) {
	if c.cpuTime == "" {
		return 0, ErrNoController
	}
	if c.mode == ModeV2 {
		us, ok, err := readKey(c.cpuTime, "usage_usec")
		if err == nil && !ok {
			err = fmt.Errorf("%s has no usage_usec", c.cpuTime)
		}
		return time.Duration(us) * time.Microsecond, err
	}
	ns, err := readInt(c.cpuTime)
	return time.Duration(ns), err
}

// writeValue writes v to an existing cgroup file. The error names the
// file and the value.
func writeValue(file, v string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", v, file, err)
	}
	if _, err := f.WriteString(v); err != nil {
		f.Close()
		return fmt.Errorf("write %q to %s: %w", v, file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, file, err)
	}
	return nil
}

// writeIfExists writes v to file when the kernel has it, and does nothing
// otherwise (an error wrapping fs.ErrNotExist is returned then, for
// callers that care).
func writeIfExists(file, v string) error {
	if _, err := os.Stat(file); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return writeValue(file, v)
}

// readInt reads a file holding one unsigned number.
func readInt(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return n, nil
}

// readKey reads the value of key from a flat keyed file ("key value" per
// line, as memory.events and cpu.stat), and whether the key is there.
func readKey(file, key string) (uint64, bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false, err
	}
	n, ok, err := parseKey(b, key)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", file, err)
	}
	return n, ok, nil
}

// parseKey finds key in flat keyed content ("key value" lines) and parses
// its value as an unsigned number.
func parseKey(b []byte, key string) (uint64, bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("key %s: %w", key, err)
		}
		return n, true, nil
	}
	return 0, false, sc.Err()
}
