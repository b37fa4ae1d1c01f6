package client

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

// A stopped allocation's task is killed only after the group's and the
// task's shutdown_delay, and it says so in a task event.
func TestShutdownDelayWaitsBeforeKill(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 60"}, nil)
	a.Job.TaskGroups[0].ShutdownDelay = 1500 * time.Millisecond
	a.Job.TaskGroups[0].Tasks[0].ShutdownDelay = 500 * time.Millisecond
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	if err := srv.StopAlloc(a.ID); err != nil {
		t.Fatal(err)
	}
	// While it waits, the allocation is still running and says why.
	waiting := srv.WaitForAlloc(t, a.ID, 10*time.Second, func(a *structs.Allocation) bool {
		return eventOf(a, "main", structs.TaskEventWaitingShutdownDelay) != nil
	})
	if waiting.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("status %q while waiting for the shutdown delay, want running", waiting.ClientStatus)
	}
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	if got.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("status %q: %s", got.ClientStatus, clienttest.DescribeTaskStates(got.TaskStates))
	}
	w := eventOf(got, "main", structs.TaskEventWaitingShutdownDelay)
	k := eventOf(got, "main", structs.TaskEventKilling)
	if w == nil || k == nil {
		t.Fatalf("want Waiting for shutdown delay, then Killing: %s", clienttest.DescribeTaskStates(got.TaskStates))
	}
	if !strings.Contains(w.DisplayMessage, "2s") {
		t.Errorf("waiting event %q does not name the 2s wait (group 1.5s + task 0.5s)", w.DisplayMessage)
	}
	if d := time.Duration(k.Time - w.Time); d < 2*time.Second {
		t.Fatalf("killed %s after the wait began, want at least the 2s of group and task shutdown_delay", d)
	}
}

// A client shutting down does not wait out a shutdown_delay: the task is
// gone when Shutdown returns.
func TestShutdownDelayCutByClientShutdown(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "echo $$ > $GPULAYER_ALLOC_DIR/pid; exec sleep 600"}, nil)
	a.Job.TaskGroups[0].ShutdownDelay = time.Hour
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	var pid int
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0, "no pid written"
	})
	if err := srv.StopAlloc(a.ID); err != nil {
		t.Fatal(err)
	}
	srv.WaitForAlloc(t, a.ID, 10*time.Second, func(a *structs.Allocation) bool {
		return eventOf(a, "main", structs.TaskEventWaitingShutdownDelay) != nil
	})
	done := make(chan error, 1)
	go func() { done <- c.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Shutdown still waiting after 60s: it waited out the one-hour shutdown_delay")
	}
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		err := syscall.Kill(pid, 0)
		return err == syscall.ESRCH, "task process still exists after Shutdown"
	})
}

// startDelayed runs a task with a group shutdown_delay of an hour and
// returns its allocation once it runs.
func startDelayed(t *testing.T, srv *clienttest.Server, c *Client) *structs.Allocation {
	t.Helper()
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 600"}, nil)
	a.Job.TaskGroups[0].ShutdownDelay = time.Hour
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	return a
}

// A stop the servers mark NoShutdownDelay (a node drain's deadline) cuts
// a shutdown_delay wait already begun.
func TestShutdownDelayCutByNoShutdownDelay(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := startDelayed(t, srv, c)
	if err := srv.StopAlloc(a.ID); err != nil {
		t.Fatal(err)
	}
	srv.WaitForAlloc(t, a.ID, 10*time.Second, func(a *structs.Allocation) bool {
		return eventOf(a, "main", structs.TaskEventWaitingShutdownDelay) != nil
	})
	cut := srv.Alloc(a.ID)
	cut.DesiredTransition.NoShutdownDelay = true
	srv.UpsertAlloc(cut)
	srv.WaitForAlloc(t, a.ID, 20*time.Second, terminal)
}

// An allocation evicted for a higher-priority job does not wait out its
// shutdown_delay: the scheduler placed the preemptor on the resources
// (GPUs) it frees, at once.
func TestShutdownDelayNotWaitedOnEviction(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := startDelayed(t, srv, c)
	ev := srv.Alloc(a.ID)
	ev.DesiredStatus, ev.DesiredDescription, ev.PreemptedByJob = structs.AllocDesiredStatusEvict, `preempted by job "urgent" (priority 90)`, "urgent"
	srv.UpsertAlloc(ev)
	got := srv.WaitForAlloc(t, a.ID, 20*time.Second, terminal)
	if w := eventOf(got, "main", structs.TaskEventWaitingShutdownDelay); w != nil {
		t.Fatalf("evicted allocation waited for its shutdown_delay: %s", w.DisplayMessage)
	}
}
