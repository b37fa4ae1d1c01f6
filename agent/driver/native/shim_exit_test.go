package native

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
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
		if run == 1 {
			// The shim is reaped once its exit file is written.
			waittest.For(t, 10*time.Second, "the shim reaped", func() (bool, string) {
				return sameProcess(h.ShimPID, h.ShimStartTime) != nil, "shim still running"
			})
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
