package native

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestShimExitBeforeExitFile: the driver learns a task's exit from the
// shim's status line, and the shim still leaves the exit file (for a
// restarted driver) before it exits. A new run of the same task waits for
// the previous run's shim, so the exit file read after it is its own.
func TestShimExitBeforeExitFile(t *testing.T) {
	d := newTestDriver(t)
	cfg := shimTask(t, "shim-exit-line", `exit 7`)
	for run, code := range []int{7, 9} {
		cfg.Config = map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", fmt.Sprintf("exit %d", code)}}
		h, err := d.StartTask(cfg)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		r := waitResult(t, d, cfg.ID, 10*time.Second)
		if r.ExitCode != code || r.Err != nil {
			t.Fatalf("run %d: exit result %+v, want code %d", run, r, code)
		}
		if err := d.DestroyTask(cfg.ID); err != nil {
			t.Fatal(err)
		}
		// DestroyTask returns once the shim, which writes the exit file
		// after reporting the exit, is reaped: the task's directories
		// can be removed then (a test's TempDir cleanup once failed with
		// "directory not empty").
		if err := sameProcess(h.ShimPID, h.ShimStartTime); err == nil {
			t.Fatalf("run %d: the shim still runs after DestroyTask", run)
		}
	}
	r, _, err := readExitFile(cfg.AllocDir(), shimExitPath(cfg))
	if err != nil || r.ExitCode != 9 {
		t.Fatalf("exit file %+v, %v: want the second run's code 9", r, err)
	}
}

// TestShimKilledWithoutExitLine: a shim killed before its task ends sends
// no exit line and writes no exit file; the task's result says so.
func TestShimKilledWithoutExitLine(t *testing.T) {
	d := newTestDriver(t)
	cfg := shimTask(t, "shim-killed", `sleep 30`)
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-h.PID, syscall.SIGKILL) })
	if err := syscall.Kill(h.ShimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d, cfg.ID, 10*time.Second)
	if r.Err == nil || r.ExitCode != -1 {
		t.Fatalf("result %+v, want an error: the shim recorded no exit", r)
	}
	if _, err := os.Stat(shimExitPath(cfg)); !os.IsNotExist(err) {
		t.Fatalf("exit file after the shim was killed: %v", err)
	}
}

// TestRecoverAtEachStepOfExit (hostile17): a driver lost at any moment of
// a task's exit (before the exit line, between it and the exit file,
// after the shim is gone) stands for an agent killed with -9 there; a
// new driver recovering the handle must report the task's own exit code,
// whichever of the shim, its exit file or neither yet it finds. The
// recovery follows the start at once, then at growing points of the exit.
func TestRecoverAtEachStepOfExit(t *testing.T) {
	d1 := newTestDriver(t)
	for i := range 12 {
		cfg := shimTask(t, fmt.Sprintf("recover-exit-%d", i), fmt.Sprintf("exit %d", 40+i))
		h, err := d1.StartTask(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Spin i times on the shim's liveness: the later the recovery, the
		// likelier it finds the exit file rather than the shim.
		for range i * 50 {
			_ = sameProcess(h.ShimPID, h.ShimStartTime)
		}
		d2 := newTestDriver(t)
		if err := d2.RecoverTask(h, cfg); err != nil {
			t.Fatalf("run %d: RecoverTask: %v", i, err)
		}
		if r := waitResult(t, d2, cfg.ID, 10*time.Second); r.ExitCode != 40+i || r.Err != nil {
			t.Fatalf("run %d: recovered result %+v, want exit %d", i, r, 40+i)
		}
		if r := waitResult(t, d1, cfg.ID, 10*time.Second); r.ExitCode != 40+i || r.Err != nil {
			t.Fatalf("run %d: starting driver's result %+v, want exit %d", i, r, 40+i)
		}
	}
}

// TestForkAndExitReportsTheLeadersExit (hostile17): a task that leaves a
// child holding its stdout open and exits reports its own exit code (after
// the shim's IOWaitDelay at most), to the starting driver and to one that
// recovers the handle.
func TestForkAndExitReportsTheLeadersExit(t *testing.T) {
	d1 := newTestDriver(t)
	cfg := shimTask(t, "fork-exit", `sleep 30 & echo child $!; exit 4`)
	h, err := d1.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-h.PID, syscall.SIGKILL) })
	d2 := newTestDriver(t)
	if err := d2.RecoverTask(h, cfg); err != nil {
		t.Fatalf("RecoverTask: %v", err)
	}
	for name, d := range map[string]*Driver{"starting": d1, "recovering": d2} {
		if r := waitResult(t, d, cfg.ID, 10*time.Second); r.ExitCode != 4 || r.Err != nil {
			t.Fatalf("%s driver's result %+v, want exit 4", name, r)
		}
	}
}
