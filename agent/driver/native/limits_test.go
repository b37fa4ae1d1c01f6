package native

import (
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/native/cgroups"
	"github.com/gpulayer/gpulayer/structs"
)

// helperTask is a task running this test binary as the helper program in
// mode (see runHelper), under the shim when shim is set.
func helperTask(t *testing.T, id, mode string, shim bool) (*driver.TaskConfig, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cfg *driver.TaskConfig
	out := &syncBuffer{}
	if shim {
		cfg = shimTask(t, id, "")
	} else {
		cfg, out = shTask(t, id, "", nil)
	}
	cfg.Config = map[string]interface{}{"command": exe}
	cfg.Env = map[string]string{helperEnv: mode}
	return cfg, out
}

// output returns what the task wrote to stdout so far.
func output(t *testing.T, cfg *driver.TaskConfig, direct *syncBuffer) string {
	t.Helper()
	if cfg.LogDir == "" {
		return direct.String()
	}
	b, err := os.ReadFile(filepath.Join(cfg.LogDir, cfg.Name+".stdout.0"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// needCgroups skips a test on a host where the driver enforces nothing.
func needCgroups(t *testing.T, d *Driver, modes ...cgroups.Mode) {
	t.Helper()
	for _, m := range modes {
		if d.cg.Mode() == m {
			return
		}
	}
	t.Skipf("needs cgroups %v; this host: %s (%s)", modes, d.cg.Mode(), d.cg.Reason())
}

// taskCgroup returns the running task's cgroup.
func taskCgroup(t *testing.T, d *Driver, id string) *cgroups.Cgroup {
	t.Helper()
	tk, err := d.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.cg == nil {
		t.Fatalf("task %s has no cgroup", id)
	}
	return tk.cg
}

func TestMemoryLimitOOMKills(t *testing.T) {
	d := newTestDriver(t)
	needCgroups(t, d, cgroups.ModeV1, cgroups.ModeV2)
	for _, shim := range []bool{true, false} {
		t.Run(fmt.Sprintf("shim=%v", shim), func(t *testing.T) {
			cfg, out := helperTask(t, fmt.Sprintf("alloc-oom/%v", shim), "alloc", shim)
			cfg.Resources = &structs.AllocatedTaskResources{CPU: 500, MemoryMB: 32}
			if _, err := d.StartTask(cfg); err != nil {
				t.Fatal(err)
			}
			r := waitResult(t, d, cfg.ID, 30*time.Second)
			if !r.OOMKilled || r.Signal != int(syscall.SIGKILL) {
				t.Fatalf("result %+v (output %q), want OOM killed by SIGKILL", r, output(t, cfg, out))
			}
			if strings.Contains(output(t, cfg, out), "allocated") {
				t.Fatalf("the task allocated 200 MiB under a 32 MiB limit")
			}
			path := taskCgroup(t, d, cfg.ID).Path()
			if err := d.DestroyTask(cfg.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("cgroup %s left after DestroyTask: %v", path, err)
			}
		})
	}
	t.Run("within the limit", func(t *testing.T) {
		// 16 MiB (more with the race detector's shadow memory) under 256.
		cfg, out := helperTask(t, "alloc-ok/main", "alloc", true)
		cfg.Env[helperAllocEnv] = "16"
		cfg.Resources = &structs.AllocatedTaskResources{CPU: 500, MemoryMB: 256}
		if _, err := d.StartTask(cfg); err != nil {
			t.Fatal(err)
		}
		if r := waitResult(t, d, cfg.ID, 30*time.Second); !r.Successful() || r.OOMKilled {
			t.Fatalf("result %+v (output %q), want success", r, output(t, cfg, out))
		}
	})
}

func TestCPUHardLimit(t *testing.T) {
	d := newTestDriver(t)
	needCgroups(t, d, cgroups.ModeV1, cgroups.ModeV2)
	cfg, out := helperTask(t, "spin/main", "spin", true)
	// 1000 MHz on a node of 2000 MHz cores: half a core at most.
	cfg.Resources = &structs.AllocatedTaskResources{CPU: 1000, MemoryMB: 256}
	cfg.CPUMHzPerCore = 2000
	cfg.Config["cpu_hard_limit"] = true
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	cg := taskCgroup(t, d, cfg.ID)
	r := waitResult(t, d, cfg.ID, 30*time.Second)
	if !r.Successful() {
		t.Fatalf("result %+v, output %q", r, output(t, cfg, out))
	}
	var cpuNs, wallNs int64
	if _, err := fmt.Sscanf(strings.TrimSpace(output(t, cfg, out)), "cpu_ns=%d wall_ns=%d", &cpuNs, &wallNs); err != nil || wallNs <= 0 {
		t.Fatalf("helper output %q: %v", output(t, cfg, out), err)
	}
	// Two busy threads would use two cores unlimited; the cap allows 0.5.
	// The bound is generous: the helper's own start-up counts in its CPU
	// time but not in its wall time.
	cores := float64(cpuNs) / float64(wallNs)
	t.Logf("task used %.2f cores (%s of CPU in %s)", cores, time.Duration(cpuNs), time.Duration(wallNs))
	if cores > 0.65 {
		t.Fatalf("task used %.2f cores under a cap of 0.5", cores)
	}
	if used, err := cg.CPUUsage(); err == nil {
		t.Logf("the cgroup accounted %s of CPU", used)
		if c := float64(used) / float64(wallNs); c > 0.65 {
			t.Fatalf("cgroup accounted %.2f cores under a cap of 0.5", c)
		}
	}
}

func TestStopKillsProcessesThatLeftTheGroup(t *testing.T) {
	d := newTestDriver(t)
	needCgroups(t, d, cgroups.ModeV1, cgroups.ModeV2)
	for _, shim := range []bool{true, false} {
		t.Run(fmt.Sprintf("shim=%v", shim), func(t *testing.T) {
			cfg, out := helperTask(t, fmt.Sprintf("escape/%v", shim), "escape", shim)
			cfg.Resources = &structs.AllocatedTaskResources{CPU: 100, MemoryMB: 128}
			if _, err := d.StartTask(cfg); err != nil {
				t.Fatal(err)
			}
			child := waitChild(t, func() string { return output(t, cfg, out) })
			if sid := session(t, child); sid != child {
				t.Fatalf("child %d is in session %d, not one of its own", child, sid)
			}
			if err := d.StopTask(cfg.ID, 200*time.Millisecond, "SIGTERM"); err != nil {
				t.Fatal(err)
			}
			waittest.Until(t, 5*time.Second, "the escaped child to die", func() bool { return !pidAlive(child) })
			if err := d.DestroyTask(cfg.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// session returns the session ID of pid, field 6 of /proc/<pid>/stat.
func session(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	sid, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// waitChild waits for "child=<pid>" in the task's output.
func waitChild(t *testing.T, out func() string) int {
	t.Helper()
	var child int
	waittest.Until(t, 10*time.Second, "child=<pid> in the task's output", func() bool {
		for _, line := range strings.Split(out(), "\n") {
			if v, ok := strings.CutPrefix(line, "child="); ok {
				child, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		return child > 0
	})
	return child
}

// TestRecoveredTaskKeepsItsCgroup plays an agent restart: a new driver
// recovers a shim task, finds its cgroup, stops every process in it
// (a child that left the group included) and removes the cgroup.
func TestRecoveredTaskKeepsItsCgroup(t *testing.T) {
	d1 := newTestDriver(t)
	needCgroups(t, d1, cgroups.ModeV1, cgroups.ModeV2)
	cfg, _ := helperTask(t, "reattach/main", "escape", true)
	cfg.Resources = &structs.AllocatedTaskResources{CPU: 100, MemoryMB: 128}
	h, err := d1.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	child := waitChild(t, func() string { return output(t, cfg, nil) })
	dirs := taskCgroup(t, d1, cfg.ID).Placement().Dirs

	d2 := newTestDriver(t)
	if err := d2.RecoverTask(h, cfg); err != nil {
		t.Fatal(err)
	}
	if got := taskCgroup(t, d2, cfg.ID).Path(); got != dirs[0] {
		t.Fatalf("recovered cgroup %s, want %s", got, dirs[0])
	}
	if err := d2.StopTask(cfg.ID, 200*time.Millisecond, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, "the child and the task to die", func() bool { return !pidAlive(child) && !pidAlive(h.PID) })
	if r := waitResult(t, d2, cfg.ID, 10*time.Second); r.OOMKilled || r.Signal == 0 {
		t.Fatalf("recovered result %+v, want killed by a signal, not OOM", r)
	}
	if err := d2.DestroyTask(cfg.ID); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cgroup %s left after DestroyTask: %v", dir, err)
		}
	}
}

// TestUnifiedPlacement runs tasks on a v2 hierarchy without controllers
// (a hybrid host's /sys/fs/cgroup/unified): no limits, but the driver's v2
// placement (CgroupFD, in the shim and directly) and cgroup.kill, for real.
func TestUnifiedPlacement(t *testing.T) {
	root := "/sys/fs/cgroup/unified"
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		t.Skipf("no cgroup v2 hierarchy at %s", root)
	}
	d := newTestDriver(t, cgroups.Config{V2Root: root, Parent: testCgroups.Parent, PlacementOnly: true})
	if d.cg.Mode() != cgroups.ModeV2 {
		t.Fatalf("mode %s (%s), want v2", d.cg.Mode(), d.cg.Reason())
	}
	for _, shim := range []bool{true, false} {
		t.Run(fmt.Sprintf("shim=%v", shim), func(t *testing.T) {
			cfg, out := helperTask(t, fmt.Sprintf("unified/%v", shim), "escape", shim)
			h, err := d.StartTask(cfg)
			if err != nil {
				t.Fatal(err)
			}
			child := waitChild(t, func() string { return output(t, cfg, out) })
			cg := taskCgroup(t, d, cfg.ID)
			for _, pid := range []int{h.PID, child} {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
				if err != nil {
					t.Fatal(err)
				}
				if got := cgroups.ParseProcCgroup(b)[""]; filepath.Join(root, got) != cg.Path() {
					t.Fatalf("pid %d is in v2 cgroup %q, want %s", pid, got, cg.Path())
				}
			}
			if h.ShimPID > 0 {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", h.ShimPID))
				if got := cgroups.ParseProcCgroup(b)[""]; filepath.Join(root, got) == cg.Path() {
					t.Fatalf("the shim is in the task's cgroup")
				}
			}
			if err := d.StopTask(cfg.ID, 200*time.Millisecond, "SIGTERM"); err != nil {
				t.Fatal(err)
			}
			waittest.Until(t, 5*time.Second, "the escaped child to die", func() bool { return !pidAlive(child) })
			if err := d.DestroyTask(cfg.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(cg.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("cgroup %s left after DestroyTask: %v", cg.Path(), err)
			}
		})
	}
	t.Run("limits need controllers", func(t *testing.T) {
		cfg, _ := helperTask(t, "unified/limits", "escape", true)
		cfg.Resources = &structs.AllocatedTaskResources{CPU: 100, MemoryMB: 64}
		_, err := d.StartTask(cfg)
		if !errors.Is(err, cgroups.ErrNoController) || !strings.Contains(err.Error(), "cgroup") {
			t.Fatalf("StartTask: %v, want a cgroup error", err)
		}
		if _, err := d.InspectTask(cfg.ID); !errors.Is(err, driver.ErrTaskNotFound) {
			t.Fatalf("failed start left a task: %v", err)
		}
		// The driver goes on: the next task starts.
		cfg2, out := shTask(t, "unified/after", "echo ran", nil)
		if _, err := d.StartTask(cfg2); err != nil {
			t.Fatal(err)
		}
		if r := waitResult(t, d, cfg2.ID, 10*time.Second); !r.Successful() || out.String() != "ran\n" {
			t.Fatalf("result %+v output %q", r, out.String())
		}
	})
}

func TestCPUHardLimitConfig(t *testing.T) {
	d := newTestDriver(t)
	cases := []struct {
		name  string
		value interface{}
		cpu   int64
		mhz   int64
		want  string
	}{
		{"not a bool", "yes", 500, 2000, `key "cpu_hard_limit" must be true or false, got a string "yes"`},
		{"a number", 1, 500, 2000, `key "cpu_hard_limit" must be true or false, got a number 1`},
		{"without MHz per core", true, 500, 0, `key "cpu_hard_limit"`},
		{"without cpu", true, 0, 2000, `key "cpu_hard_limit" is true but the task's resources set no cpu`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.value == true && d.cg.Mode() == cgroups.ModeNone {
				t.Skip("nothing is capped without cgroups")
			}
			cfg, _ := shTask(t, "hard/"+tc.name, "true", nil)
			cfg.Config["cpu_hard_limit"] = tc.value
			cfg.Resources = &structs.AllocatedTaskResources{CPU: tc.cpu, MemoryMB: 64}
			cfg.CPUMHzPerCore = tc.mhz
			_, err := d.StartTask(cfg)
			if !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("StartTask: %v, want an invalid config error containing %q", err, tc.want)
			}
		})
	}
}

func TestFingerprintLimits(t *testing.T) {
	cases := []struct {
		name string
		cc   cgroups.Config
		mode cgroups.Mode
		want string
	}{
		{"disabled", cgroups.Config{Disable: true}, cgroups.ModeNone, "none"},
		{"no hierarchy", cgroups.Config{V2Root: "/nonexistent", V1Root: "/nonexistent"}, cgroups.ModeNone, "none"},
		{"this host", testCgroups, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDriver(t, tc.cc)
			fp := d.Fingerprint()
			got := fp.Attributes["driver.native.limits"]
			switch d.cg.Mode() {
			case cgroups.ModeNone:
				want := "healthy (CPU and memory limits not enforced: " + d.cg.Reason() + ")"
				if got != "none" || fp.HealthDescription != want || d.cg.Reason() == "" {
					t.Fatalf("limits %q, health %q; want none and %q", got, fp.HealthDescription, want)
				}
			default:
				if got != "cgroups-"+string(d.cg.Mode()) || !strings.Contains(fp.HealthDescription, "enforced by cgroups") {
					t.Fatalf("limits %q, health %q in mode %s", got, fp.HealthDescription, d.cg.Mode())
				}
			}
			if tc.mode != "" && d.cg.Mode() != tc.mode {
				t.Fatalf("mode %s, want %s", d.cg.Mode(), tc.mode)
			}
			if !fp.Healthy || !fp.Detected {
				t.Fatalf("fingerprint %+v", fp)
			}
		})
	}
}

// TestNoCgroupsStillRuns checks that a driver without cgroups runs tasks
// (unlimited), cpu_hard_limit included.
func TestNoCgroupsStillRuns(t *testing.T) {
	d := newTestDriver(t, cgroups.Config{Disable: true})
	cfg, out := shTask(t, "nocg/main", "echo ran", nil)
	cfg.Config["cpu_hard_limit"] = true
	cfg.Resources = &structs.AllocatedTaskResources{CPU: 500, MemoryMB: 64}
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, d, cfg.ID, 10*time.Second); !r.Successful() || out.String() != "ran\n" {
		t.Fatalf("result %+v output %q", r, out.String())
	}
}

// TestLimitsMatchStructs: the cgroups package's copies of the task
// resource caps (kept there so the shim does not import structs) are the
// caps job validation enforces.
func TestLimitsMatchStructs(t *testing.T) {
	if cgroups.MaxMemoryMB != structs.MaxMemoryMB || cgroups.MaxCPUMHz != structs.MaxCPUMHz {
		t.Fatalf("cgroups caps %d MiB, %d MHz; structs %d MiB, %d MHz", cgroups.MaxMemoryMB, cgroups.MaxCPUMHz, structs.MaxMemoryMB, structs.MaxCPUMHz)
	}
}
