package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeV2Files are the files the kernel puts in a new cgroup2 directory
// whose parent enables cpu and memory, with their initial contents.
var fakeV2Files = map[string]string{
	"cgroup.procs":           "",
	"cgroup.controllers":     "cpu memory\n",
	"cgroup.subtree_control": "\n",
	"cgroup.kill":            "",
	"memory.max":             "max\n",
	"memory.swap.max":        "max\n",
	"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
	"memory.current":         "4096\n",
	"cpu.weight":             "100\n",
	"cpu.max":                "max 100000\n",
	"cpu.stat":               "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
}

// fakeKernel returns a mkdir that plays the kernel's part in a plain
// directory (a new cgroup comes with its files) and an rmdir that removes
// such a directory with its files.
func fakeKernel(t *testing.T) (mkdir, rmdir func(string) error) {
	t.Helper()
	mkdir = func(p string) error {
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		for name, content := range fakeV2Files {
			if err := os.WriteFile(filepath.Join(p, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	}
	return mkdir, os.RemoveAll
}

// fakeV2Root lays out the root of a cgroup2 mount in a temporary
// directory, with the given controllers and subtree_control.
func fakeV2Root(t *testing.T, controllers, subtree string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"cgroup.controllers":     controllers + "\n",
		"cgroup.subtree_control": subtree + "\n",
		"cgroup.procs":           "1\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestV2DetectEnablesControllers(t *testing.T) {
	cases := []struct {
		name, controllers, subtree, wantRoot string
	}{
		{"root lacks them", "cpuset cpu io memory pids", "pids", "+cpu +memory"},
		{"root has them", "cpuset cpu io memory pids", "cpu io memory pids", "cpu io memory pids\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeV2Root(t, tc.controllers, tc.subtree)
			mkdir, rmdir := fakeKernel(t)
			m := detect(Config{V2Root: root, V1Root: t.TempDir()}, mkdir, rmdir)
			if m.Mode() != ModeV2 || m.Reason() != "" {
				t.Fatalf("mode %s reason %q, want v2", m.Mode(), m.Reason())
			}
			if got := readString(t, filepath.Join(root, "cgroup.subtree_control")); got != tc.wantRoot {
				t.Errorf("root subtree_control %q, want %q", got, tc.wantRoot)
			}
			if got := readString(t, filepath.Join(root, DefaultParent, "cgroup.subtree_control")); got != "+cpu +memory" {
				t.Errorf("parent subtree_control %q, want %q", got, "+cpu +memory")
			}
		})
	}
}

func TestV2DetectNone(t *testing.T) {
	root := fakeV2Root(t, "cpuset io pids", "")
	mkdir, rmdir := fakeKernel(t)
	m := detect(Config{V2Root: root}, mkdir, rmdir)
	if m.Mode() != ModeNone || !strings.Contains(m.Reason(), "lacks the cpu and memory controller(s)") {
		t.Fatalf("mode %s reason %q", m.Mode(), m.Reason())
	}
	if _, err := os.Stat(filepath.Join(root, DefaultParent)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("parent cgroup made although unusable: %v", err)
	}
}

func TestV2CreateWritesLimits(t *testing.T) {
	untouched := func(f string) string { return fakeV2Files[f] }
	cases := []struct {
		name   string
		limits Limits
		want   map[string]string
	}{
		{"memory, weight and cap", Limits{MemoryBytes: 32 << 20, CPUShares: 1000, CPUQuota: 50000, CPUPeriod: 100000}, map[string]string{
			"memory.max": "33554432", "memory.swap.max": "0", "cpu.weight": "99", "cpu.max": "50000 100000",
		}},
		{"memory and weight, no cap", Limits{MemoryBytes: 1 << 30, CPUShares: 1024}, map[string]string{
			"memory.max": "1073741824", "memory.swap.max": "0", "cpu.weight": "100", "cpu.max": untouched("cpu.max"),
		}},
		{"no limits", Limits{}, map[string]string{
			"memory.max": untouched("memory.max"), "memory.swap.max": untouched("memory.swap.max"),
			"cpu.weight": untouched("cpu.weight"), "cpu.max": untouched("cpu.max"),
		}},
	}
	root := fakeV2Root(t, "cpu memory", "cpu memory")
	mkdir, rmdir := fakeKernel(t)
	m := detect(Config{V2Root: root}, mkdir, rmdir)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "alloc-1/" + strings.ReplaceAll(tc.name, " ", "-")
			c, err := m.Create(id, tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			name, _ := Name(id)
			dir := filepath.Join(root, DefaultParent, name)
			if c.Path() != dir || c.Mode() != ModeV2 {
				t.Fatalf("cgroup at %s (%s), want %s", c.Path(), c.Mode(), dir)
			}
			for f, want := range tc.want {
				if got := readString(t, filepath.Join(dir, f)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
			if p := c.Placement(); p.Mode != ModeV2 || len(p.Dirs) != 1 || p.Dirs[0] != dir {
				t.Errorf("placement %+v", p)
			}
			if err := c.Destroy(); err != nil {
				t.Fatal(err)
			}
			if got := readString(t, filepath.Join(root, DefaultParent, "cgroup.subtree_control")); got != "+cpu +memory" {
				t.Errorf("parent subtree_control %q", got)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("cgroup left after Destroy: %v", err)
			}
		})
	}
}

func TestV2CountersAndReopen(t *testing.T) {
	root := fakeV2Root(t, "cpu memory", "cpu memory")
	mkdir, rmdir := fakeKernel(t)
	m := detect(Config{V2Root: root}, mkdir, rmdir)
	c, err := m.Create("a/t", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if oom, err := c.OOMKilled(); oom || err != nil {
		t.Fatalf("OOMKilled = %v, %v on a fresh cgroup", oom, err)
	}
	if mem, err := c.MemoryUsage(); mem != 4096 || err != nil {
		t.Fatalf("MemoryUsage = %d, %v", mem, err)
	}
	if cpu, err := c.CPUUsage(); cpu != 2500*time.Microsecond || err != nil {
		t.Fatalf("CPUUsage = %s, %v", cpu, err)
	}
	if err := os.WriteFile(filepath.Join(c.Path(), "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A restarted agent opens the same cgroup and reads the same counters.
	c2, err := m.Open("a/t")
	if err != nil {
		t.Fatal(err)
	}
	if oom, err := c2.OOMKilled(); !oom || err != nil {
		t.Fatalf("OOMKilled = %v, %v after an OOM kill", oom, err)
	}
	// A new run of the same task starts from a fresh cgroup.
	c3, err := m.Create("a/t", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if oom, err := c3.OOMKilled(); oom || err != nil {
		t.Fatalf("OOMKilled = %v, %v in the new run's cgroup", oom, err)
	}
	if err := c3.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("a/t"); !errors.Is(err, ErrNotFound) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open after Destroy: %v, want ErrNotFound", err)
	}
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	root := fakeV2Root(t, "cpu memory", "cpu memory")
	mkdir, rmdir := fakeKernel(t)
	m := detect(Config{V2Root: root}, mkdir, rmdir)
	// A kernel without the cpu controller in the child: cpu.weight is
	// missing, so setting it fails and the half-made cgroup goes.
	m.mkdir = func(p string) error {
		if err := mkdir(p); err != nil {
			return err
		}
		return os.Remove(filepath.Join(p, "cpu.weight"))
	}
	_, err := m.Create("a/t", Limits{MemoryBytes: 1 << 20, CPUShares: 100})
	if err == nil || !strings.Contains(err.Error(), "cpu.weight") {
		t.Fatalf("Create error %v, want one naming cpu.weight", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, DefaultParent))
	for _, e := range entries {
		if e.IsDir() {
			t.Fatalf("failed Create left %s behind", e.Name())
		}
	}
}
