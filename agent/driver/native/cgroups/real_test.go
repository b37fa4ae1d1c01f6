package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testParent is a parent cgroup of this test process's own, so tests
// never touch the agent's "gpulayer" cgroups.
func testParent(t *testing.T) string {
	return fmt.Sprintf("gpulayer-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// needRoot skips a test that writes to the host's cgroups when it cannot.
func needRoot(t *testing.T, files ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("needs %s: %v", f, err)
		}
	}
}

// removeParents removes the test's parent cgroup from every hierarchy
// it was made in, once the test ends.
func removeParents(t *testing.T, m *Manager) {
	t.Cleanup(func() {
		dirs := m.v1
		if m.v2 != "" {
			dirs = append(dirs, hierarchy{Parent: m.v2})
		}
		for _, h := range dirs {
			if err := syscall.Rmdir(h.Parent); err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Errorf("remove test parent cgroup %s: %v", h.Parent, err)
			}
		}
	})
}

func pidGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || strings.HasPrefix(string(b[i+1:]), " Z")
}

// TestV1Real creates a task cgroup in the host's v1 memory and cpu
// hierarchies, checks what the kernel shows of its limits, starts a
// process inside it with Placement.Start (which must leave this process
// where it was), and kills and removes it.
func TestV1Real(t *testing.T) {
	needRoot(t, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.shares")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Skip("the host's cgroups are v2")
	}
	m := Detect(Config{Parent: testParent(t)})
	removeParents(t, m)
	if m.Mode() != ModeV1 {
		t.Fatalf("mode %s (%s), want v1", m.Mode(), m.Reason())
	}
	l := Limits{MemoryBytes: 48 << 20, CPUShares: 300, CPUQuota: 25000, CPUPeriod: 100000}
	c, err := m.Create("alloc-v1/main", l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Error(err)
		}
	})
	mem := filepath.Join("/sys/fs/cgroup/memory", testParent(t), "alloc-v1.main")
	cpu := filepath.Join("/sys/fs/cgroup/cpu", testParent(t), "alloc-v1.main")
	want := map[string]string{
		filepath.Join(mem, "memory.limit_in_bytes"): "50331648",
		filepath.Join(cpu, "cpu.shares"):            "300",
		filepath.Join(cpu, "cpu.cfs_period_us"):     "100000",
		filepath.Join(cpu, "cpu.cfs_quota_us"):      "25000",
	}
	if _, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); err == nil {
		want[filepath.Join(mem, "memory.memsw.limit_in_bytes")] = "50331648"
	}
	for f, w := range want {
		if got := strings.TrimSpace(readString(t, f)); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}

	before, _ := os.ReadFile("/proc/self/cgroup")
	cmd := exec.Command("/bin/sleep", "60")
	if err := c.Placement().Start(cmd); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile("/proc/self/cgroup")
	if string(before) != string(after) {
		t.Errorf("this process did not go back to its cgroups:\nbefore %s\nafter %s", before, after)
	}
	pids, err := c.Procs()
	if err != nil || !slices.Contains(pids, cmd.Process.Pid) || slices.Contains(pids, os.Getpid()) {
		t.Fatalf("cgroup procs %v (%v), want the child %d and not this process", pids, err, cmd.Process.Pid)
	}
	child := ParseProcCgroup(must(os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))))
	for _, ctrl := range []string{"memory", "cpu"} {
		if !strings.HasSuffix(child[ctrl], "/alloc-v1.main") {
			t.Errorf("child's %s cgroup %q", ctrl, child[ctrl])
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child ended with %v, want killed", err)
	}
	if oom, err := c.OOMKilled(); oom || err != nil {
		t.Fatalf("OOMKilled = %v, %v for a task killed by us", oom, err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{mem, cpu} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after Destroy: %v", d, err)
		}
	}
}

// TestV1StartStoppedInsideFromTheStart: a task started by StartStopped
// (the agent's own direct start on v1) is in its cgroup when its program
// runs its first instruction: what it reads of /proc/self/cgroup at once,
// and a child it forks at once, are inside; the starting process never
// joins. A cgroup it cannot be moved into kills it and says so.
func TestV1StartStoppedInsideFromTheStart(t *testing.T) {
	needRoot(t, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.shares")
	m := Detect(Config{Parent: testParent(t)})
	removeParents(t, m)
	if m.Mode() != ModeV1 {
		t.Skipf("mode %s, not v1", m.Mode())
	}
	c, err := m.Create("alloc-v1/stopped", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	before, _ := os.ReadFile("/proc/self/cgroup")
	for i := 0; i < 5; i++ {
		cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
		var out strings.Builder
		cmd.Stdout = &out
		if err := c.Placement().StartStopped(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		seen := ParseProcCgroup([]byte(out.String()))
		for _, ctrl := range []string{"memory", "cpu"} {
			if !strings.HasSuffix(seen[ctrl], "/alloc-v1.stopped") {
				t.Fatalf("run %d: the task's first read says its %s cgroup is %q:\n%s", i, ctrl, seen[ctrl], out.String())
			}
		}
	}
	if after, _ := os.ReadFile("/proc/self/cgroup"); string(before) != string(after) {
		t.Errorf("the starting process changed cgroups:\nbefore %s\nafter %s", before, after)
	}
	// A child forked at once, in a session of its own, is inside too.
	cmd := exec.Command("/bin/sh", "-c", "setsid /bin/sleep 60 & echo $!; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Placement().StartStopped(cmd); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	child, aerr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || aerr != nil || child <= 0 {
		t.Fatalf("the child's pid: %q (%v, %v)", line, err, aerr)
	}
	go func() { _ = cmd.Wait() }()
	pids, err := c.Procs()
	if err != nil || !slices.Contains(pids, child) {
		t.Fatalf("cgroup procs %v (%v), want the forked child %d", pids, err, child)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, "the forked child gone", func() bool { return pidGone(child) })

	// A placement whose directory is gone: the task is killed, never let
	// run outside.
	bad := c.Placement()
	bad.Dirs = append([]string{filepath.Join(t.TempDir(), "no-such-cgroup")}, bad.Dirs...)
	sleep := exec.Command("/bin/sleep", "60")
	err = bad.StartStopped(sleep)
	if err == nil || !strings.Contains(err.Error(), "no-such-cgroup") {
		t.Fatalf("StartStopped into a missing cgroup: %v", err)
	}
	if sleep.Process != nil && !pidGone(sleep.Process.Pid) {
		t.Fatalf("task %d left running after a failed placement", sleep.Process.Pid)
	}
}

// TestV1KillFindsEscapedProcesses kills a cgroup whose processes are in
// several sessions: a kill of one process group would miss some.
func TestV1KillFindsEscapedProcesses(t *testing.T) {
	needRoot(t, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.shares")
	m := Detect(Config{Parent: testParent(t)})
	removeParents(t, m)
	if m.Mode() != ModeV1 {
		t.Skipf("mode %s, not v1", m.Mode())
	}
	c, err := m.Create("alloc-v1/escape", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	var pids []int
	for i := 0; i < 3; i++ {
		cmd := exec.Command("/bin/sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Placement().Start(cmd); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
		go func() { _ = cmd.Wait() }()
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waittest.Until(t, 5*time.Second, "pid "+strconv.Itoa(pid)+" gone", func() bool { return pidGone(pid) })
	}
}

// TestUnifiedRealPlacementAndKill uses a v2 hierarchy without controllers
// (a hybrid host's /sys/fs/cgroup/unified) to check, on the real kernel,
// what v2 mode does without limits: a child cloned into the task cgroup
// through CgroupFD, seen in cgroup.procs, killed by cgroup.kill.
func TestUnifiedRealPlacementAndKill(t *testing.T) {
	root := "/sys/fs/cgroup/unified"
	needRoot(t, filepath.Join(root, "cgroup.controllers"))

	if m := Detect(Config{V2Root: root, Parent: testParent(t)}); m.Mode() != ModeNone || !strings.Contains(m.Reason(), "lacks the cpu and memory") {
		removeParents(t, m)
		t.Fatalf("controller-less v2: mode %s reason %q, want none for lack of controllers", m.Mode(), m.Reason())
	}
	m := Detect(Config{V2Root: root, Parent: testParent(t), PlacementOnly: true})
	removeParents(t, m)
	if m.Mode() != ModeV2 {
		t.Fatalf("mode %s (%s), want v2", m.Mode(), m.Reason())
	}
	if _, err := m.Create("alloc-v2/limits", Limits{MemoryBytes: 1 << 20}); !errors.Is(err, ErrNoController) {
		t.Fatalf("limits without controllers: %v, want ErrNoController", err)
	}
	c, err := m.Create("alloc-v2/main", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Placement().Start(cmd); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if own := ParseProcCgroup(must(os.ReadFile("/proc/self/cgroup")))[""]; strings.Contains(own, "alloc-v2.main") {
		t.Fatalf("this process is in the task cgroup: %s", own)
	}
	var pids []int
	waittest.Until(t, 5*time.Second, "shell and its child in cgroup.procs", func() bool {
		pids, _ = c.Procs()
		return len(pids) == 2
	})
	if !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("cgroup procs %v lack the child %d", pids, cmd.Process.Pid)
	}
	if cpu, err := c.CPUUsage(); err != nil || cpu < 0 {
		t.Fatalf("CPUUsage = %s, %v", cpu, err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("shell ended with %v, want killed", err)
	}
	for _, pid := range pids {
		waittest.Until(t, 5*time.Second, "pid "+strconv.Itoa(pid)+" gone", func() bool { return pidGone(pid) })
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left after Destroy: %v", c.Path(), err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
