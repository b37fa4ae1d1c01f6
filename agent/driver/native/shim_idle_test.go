package native

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
)

// idlePID returns the pid of the driver's idle shim once it has one.
func idlePID(t *testing.T, d *Driver) int {
	t.Helper()
	var pid int
	waittest.Until(t, 10*time.Second, "an idle shim", func() bool {
		d.shimMu.Lock()
		defer d.shimMu.Unlock()
		if d.idle != nil {
			pid = d.idle.cmd.Process.Pid
		}
		return d.idle != nil
	})
	return pid
}

// TestIdleShimRunsTheNextTask: after a start the driver keeps a shim
// waiting; the next task runs under that very process (started before
// the task was known), with its logs and exit status as any shim's; one
// killed while it waited is replaced, not handed a task; Close stops the
// waiting one.
func TestIdleShimRunsTheNextTask(t *testing.T) {
	d := newTestDriver(t)
	first := shimTask(t, "idle-1", `exit 0`)
	if _, err := d.StartTask(first); err != nil {
		t.Fatal(err)
	}
	waitResult(t, d, first.ID, 10*time.Second)

	waiting := idlePID(t, d)
	cfg := shimTask(t, "idle-2", `echo "out $GREETING"; exit 3`)
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.ShimPID != waiting {
		t.Fatalf("task ran under shim %d, want the idle one %d", h.ShimPID, waiting)
	}
	if r := waitResult(t, d, cfg.ID, 10*time.Second); r.ExitCode != 3 || r.Err != nil {
		t.Fatalf("exit result %+v, want code 3", r)
	}
	if got := readLog(t, cfg, "stdout"); got != "out hi\n" {
		t.Fatalf("stdout %q", got)
	}

	// Killed while waiting: the next start does not use it.
	dead := idlePID(t, d)
	if err := syscall.Kill(dead, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 10*time.Second, "the killed shim gone", func() bool {
		d.shimMu.Lock()
		defer d.shimMu.Unlock()
		return !d.idle.alive()
	})
	cfg3 := shimTask(t, "idle-3", `exit 0`)
	h3, err := d.StartTask(cfg3)
	if err != nil {
		t.Fatalf("start after the idle shim was killed: %v", err)
	}
	if h3.ShimPID == dead {
		t.Fatalf("task handed to the killed shim %d", dead)
	}
	waitResult(t, d, cfg3.ID, 10*time.Second)

	last := idlePID(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	waittest.NoErr(t, 10*time.Second, "the idle shim stopped", func() (bool, error) {
		err := syscall.Kill(last, 0)
		if err == nil {
			return false, fmt.Errorf("shim %d still runs", last)
		}
		return true, nil
	})
	// A closed driver still starts tasks, with a shim of their own.
	cfg4 := shimTask(t, "idle-4", `exit 0`)
	if _, err := d.StartTask(cfg4); err != nil {
		t.Fatal(err)
	}
	waitResult(t, d, cfg4.ID, 10*time.Second)
	d.shimMu.Lock()
	kept := d.idle
	d.shimMu.Unlock()
	if kept != nil {
		t.Fatal("a closed driver keeps an idle shim")
	}
}
