package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

// sleepAlloc is a batch allocation whose task "main" sleeps for a minute,
// with the group's max_run_duration set to group and the restart policy
// allowing 3 restarts (so a deadline that counted as an ordinary failure
// would restart it).
func sleepAlloc(nodeID string, group time.Duration) *structs.Allocation {
	a := clienttest.NativeAlloc(nodeID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo run >> $GPULAYER_ALLOC_DIR/runs; exec sleep 60"}, nil)
	tg := a.Job.TaskGroups[0]
	tg.MaxRunDuration = group
	tg.RestartPolicy.Attempts = 3
	tg.Tasks[0].KillTimeout = 500 * time.Millisecond
	return a
}

// addSleepTask adds a second task, "side", sleeping for a minute, with the
// given task-level max_run_duration.
func addSleepTask(a *structs.Allocation, own time.Duration) {
	t := a.Job.TaskGroups[0].Tasks[0].Copy()
	t.Name = "side"
	t.Config = map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", "exec sleep 60"}}
	t.MaxRunDuration = own
	a.Job.TaskGroups[0].Tasks = append(a.Job.TaskGroups[0].Tasks, t)
	a.AllocatedResources.Tasks["side"] = &structs.AllocatedTaskResources{CPU: 100, MemoryMB: 64}
}

func finalEvent(ts *structs.TaskState) *structs.TaskEvent {
	if ts == nil || len(ts.Events) == 0 {
		return nil
	}
	return ts.Events[len(ts.Events)-1]
}

// checkDeadlineFailed checks that task ended failed at its deadline:
// last event Deadline Exceeded naming the duration, a Killing event that
// says why, no restart, and not before the deadline.
func checkDeadlineFailed(t *testing.T, a *structs.Allocation, task string, d time.Duration) {
	t.Helper()
	ts := a.TaskStates[task]
	if ts == nil || ts.State != structs.TaskStateDead || !ts.Failed {
		t.Fatalf("task %s: want dead and failed: %s", task, clienttest.DescribeTaskStates(a.TaskStates))
	}
	e := finalEvent(ts)
	if e == nil || e.Type != structs.TaskEventDeadlineExceeded || !strings.Contains(e.DisplayMessage, "max_run_duration of "+d.String()) ||
		e.Details["max_run_duration"] != d.String() {
		t.Fatalf("task %s: last event %+v, want Deadline Exceeded naming %s", task, e, d)
	}
	if ts.Restarts != 0 || eventOf(a, task, structs.TaskEventRestarting) != nil {
		t.Errorf("task %s restarted after its deadline: %s", task, clienttest.DescribeTaskStates(a.TaskStates))
	}
	if ts.Deadline == 0 || ts.FinishedAt < ts.Deadline {
		t.Errorf("task %s finished at %d, before its deadline %d", task, ts.FinishedAt, ts.Deadline)
	}
}

// TestMaxRunDurationStopsTask: a batch task running past its group's
// max_run_duration is stopped (a Killing event that names the deadline,
// then Deadline Exceeded), fails without being restarted, fails its
// allocation with a description that says why, and the recorded start
// is forgotten once the allocation finished.
func TestMaxRunDurationStopsTask(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := sleepAlloc(c.Node().ID, 2*time.Second)
	srv.UpsertAlloc(a)
	running := srv.WaitForAlloc(t, a.ID, 15*time.Second, func(a *structs.Allocation) bool {
		return a.ClientStatus == structs.AllocClientStatusRunning && a.TaskStates["main"].State == structs.TaskStateRunning
	})
	if running.TaskStates["main"].Deadline == 0 {
		t.Fatalf("running task reports no deadline: %+v", running.TaskStates["main"])
	}
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	if got.ClientStatus != structs.AllocClientStatusFailed || got.ClientDescription != "Allocation exceeded max_run_duration: task main" {
		t.Fatalf("alloc %s %q, want failed at its deadline: %s", got.ClientStatus, got.ClientDescription, clienttest.DescribeTaskStates(got.TaskStates))
	}
	checkDeadlineFailed(t, got, "main", 2*time.Second)
	if k := eventOf(got, "main", structs.TaskEventKilling); k == nil || !strings.Contains(k.DisplayMessage, "max_run_duration of 2s exceeded") {
		t.Errorf("Killing event %+v does not name the deadline", k)
	}
	if n := countRuns(t, c, a.ID); n != 1 {
		t.Errorf("ran %d times, want 1", n)
	}
	clienttest.WaitFor(t, 5*time.Second, func() (bool, string) {
		starts, err := c.state.allocStarts()
		return err == nil && len(starts) == 0, "recorded starts kept after the allocation finished"
	})
}

// TestMaxRunDurationTaskFinishesFirst: a task that ends before its
// deadline completes normally, and nothing of the deadline is kept.
func TestMaxRunDurationTaskFinishesFirst(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/true", nil, nil)
	a.Job.TaskGroups[0].MaxRunDuration = time.Minute
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	if got.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("alloc %s: %s", got.ClientStatus, clienttest.DescribeTaskStates(got.TaskStates))
	}
	if eventOf(got, "main", structs.TaskEventDeadlineExceeded) != nil {
		t.Fatal("a task that finished in time has a Deadline Exceeded event")
	}
	clienttest.WaitFor(t, 5*time.Second, func() (bool, string) {
		starts, err := c.state.allocStarts()
		return err == nil && len(starts) == 0, "recorded start kept"
	})
}

// TestMaxRunDurationGroupStopsEveryTask: a group's max_run_duration stops
// all its tasks together, each failing with its own Deadline Exceeded
// event (none merely killed as the sibling of a failed task).
func TestMaxRunDurationGroupStopsEveryTask(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := sleepAlloc(c.Node().ID, 2*time.Second)
	addSleepTask(a, 0)
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	if got.ClientDescription != "Allocation exceeded max_run_duration: tasks main, side" {
		t.Errorf("description %q", got.ClientDescription)
	}
	checkDeadlineFailed(t, got, "main", 2*time.Second)
	checkDeadlineFailed(t, got, "side", 2*time.Second)
}

// TestMaxRunDurationTaskLevel: a task's own max_run_duration, shorter than
// the group's, stops it; its sibling, without one, is killed with it as
// after any failure, and is not failed.
func TestMaxRunDurationTaskLevel(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := sleepAlloc(c.Node().ID, time.Hour)
	a.Job.TaskGroups[0].Tasks[0].MaxRunDuration = 0
	addSleepTask(a, 600*time.Millisecond)
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	checkDeadlineFailed(t, got, "side", 600*time.Millisecond)
	main := got.TaskStates["main"]
	if main.Failed || finalEvent(main).Type != structs.TaskEventKilled {
		t.Errorf("sibling: %s", clienttest.DescribeTaskStates(got.TaskStates))
	}
	if want := main.Deadline - got.TaskStates["side"].Deadline; want != int64(time.Hour-600*time.Millisecond) {
		t.Errorf("deadlines differ by %s, want the group's hour less the task's 600ms", time.Duration(want))
	}
}

// TestMaxRunDurationDuringRestartDelay: a task waiting to be restarted
// when its deadline passes is not started again.
func TestMaxRunDurationDuringRestartDelay(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo run >> $GPULAYER_ALLOC_DIR/runs; exit 3"}, nil)
	tg := a.Job.TaskGroups[0]
	tg.MaxRunDuration = 2 * time.Second
	tg.RestartPolicy = &structs.RestartPolicy{Attempts: 5, Interval: time.Hour, Delay: time.Minute, Mode: structs.RestartModeFail}
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	ts := got.TaskStates["main"]
	e := finalEvent(ts)
	if got.ClientStatus != structs.AllocClientStatusFailed || !ts.Failed || e.Type != structs.TaskEventDeadlineExceeded ||
		!strings.Contains(e.DisplayMessage, "while waiting to restart") {
		t.Fatalf("alloc %s: %s", got.ClientStatus, clienttest.DescribeTaskStates(got.TaskStates))
	}
	if n := countRuns(t, c, a.ID); n != 1 || eventOf(got, "main", structs.TaskEventRestarting) == nil {
		t.Errorf("ran %d times, want 1, with a Restarting event: %s", n, clienttest.DescribeTaskStates(got.TaskStates))
	}
}

// TestMaxRunDurationHoldsAcrossClientRestart: the deadline is measured
// from the allocation's start as recorded in the state file. A client
// shut down and started again runs the task again (its tasks were
// stopped) with the same deadline; one whose recorded start is long past
// fails the task at once, without starting it.
func TestMaxRunDurationHoldsAcrossClientRestart(t *testing.T) {
	t.Run("restart keeps the deadline", func(t *testing.T) {
		srv := clienttest.NewServer()
		dir := t.TempDir()
		c1 := newTestClient(t, srv, dir, nil)
		a := sleepAlloc(c1.Node().ID, 4*time.Second)
		srv.UpsertAlloc(a)
		first := srv.WaitForAlloc(t, a.ID, 15*time.Second, func(a *structs.Allocation) bool {
			return a.TaskStates["main"] != nil && a.TaskStates["main"].State == structs.TaskStateRunning
		})
		deadline := first.TaskStates["main"].Deadline
		// Running goes out when the process is spawned, before the shell
		// has written its line: wait for the line before the shutdown.
		clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
			n := countRuns(t, c1, a.ID)
			return n == 1, fmt.Sprintf("ran %d times in the first life", n)
		})
		if err := c1.Shutdown(); err != nil {
			t.Fatal(err)
		}
		c2 := newTestClient(t, srv, dir, nil)
		got := srv.WaitForAlloc(t, a.ID, 20*time.Second, terminal)
		checkDeadlineFailed(t, got, "main", 4*time.Second)
		if got.TaskStates["main"].Deadline != deadline {
			t.Errorf("deadline after the restart %d, want %d (from the first start)", got.TaskStates["main"].Deadline, deadline)
		}
		if n := countRuns(t, c2, a.ID); n != 2 {
			t.Errorf("ran %d times, want 2 (once per client life)", n)
		}
	})
	t.Run("deadline passed while the client was down", func(t *testing.T) {
		srv := clienttest.NewServer()
		dir := t.TempDir()
		c1 := newTestClient(t, srv, dir, nil)
		nodeID := c1.Node().ID
		if err := c1.Shutdown(); err != nil {
			t.Fatal(err)
		}
		a := sleepAlloc(nodeID, time.Minute)
		st, err := openState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.putAllocStart(a.ID, time.Now().Add(-time.Hour).UnixNano()); err != nil {
			t.Fatal(err)
		}
		if err := st.close(); err != nil {
			t.Fatal(err)
		}
		srv.UpsertAlloc(a)
		c2 := newTestClient(t, srv, dir, nil)
		got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
		checkDeadlineFailed(t, got, "main", time.Minute)
		if e := finalEvent(got.TaskStates["main"]); !strings.Contains(e.DisplayMessage, "before it started") {
			t.Errorf("event %q", e.DisplayMessage)
		}
		if got.TaskStates["main"].StartedAt != 0 || countRuns(t, c2, a.ID) != 0 {
			t.Errorf("task started although its deadline had passed: %s", clienttest.DescribeTaskStates(got.TaskStates))
		}
	})
	// The wall clock moved back while the client was down: a recorded
	// start an hour in the future would push the deadline an hour out.
	t.Run("start in the future is taken as now", func(t *testing.T) {
		srv := clienttest.NewServer()
		dir := t.TempDir()
		c1 := newTestClient(t, srv, dir, nil)
		nodeID := c1.Node().ID
		if err := c1.Shutdown(); err != nil {
			t.Fatal(err)
		}
		a := sleepAlloc(nodeID, 3*time.Second)
		st, err := openState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.putAllocStart(a.ID, time.Now().Add(time.Hour).UnixNano()); err != nil {
			t.Fatal(err)
		}
		if err := st.close(); err != nil {
			t.Fatal(err)
		}
		srv.UpsertAlloc(a)
		before := time.Now()
		newTestClient(t, srv, dir, nil)
		got := srv.WaitForAlloc(t, a.ID, 20*time.Second, terminal)
		checkDeadlineFailed(t, got, "main", 3*time.Second)
		if dl := time.Unix(0, got.TaskStates["main"].Deadline); dl.After(before.Add(time.Minute)) {
			t.Errorf("deadline %v, want about 3 s after the client started (%v)", dl, before)
		}
	})
	t.Run("starts of allocations gone are pruned", func(t *testing.T) {
		srv := clienttest.NewServer()
		dir := t.TempDir()
		c1 := newTestClient(t, srv, dir, nil)
		if err := c1.Shutdown(); err != nil {
			t.Fatal(err)
		}
		st, err := openState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.putAllocStart("gone-alloc", time.Now().UnixNano()); err != nil {
			t.Fatal(err)
		}
		if err := st.close(); err != nil {
			t.Fatal(err)
		}
		c2 := newTestClient(t, srv, dir, nil)
		clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
			starts, err := c2.state.allocStarts()
			return err == nil && len(starts) == 0, "start of an allocation the servers do not list kept"
		})
	})
}

// blockingHook is a prestart hook that waits until its context ends, as
// a slow artifact fetch does.
type blockingHook struct{ started chan struct{} }

func (blockingHook) name() string         { return "slow" }
func (blockingHook) failureEvent() string { return "Failed slow" }
func (h blockingHook) prestart(ctx context.Context, _ *taskRunner) error {
	close(h.started)
	<-ctx.Done()
	return ctx.Err()
}

// TestMaxRunDurationCutsPrestart: a deadline passing while a prestart
// hook (an artifact fetch) runs cancels it and fails the task with the
// Deadline Exceeded event, not the hook's failure event.
func TestMaxRunDurationCutsPrestart(t *testing.T) {
	var mu sync.Mutex
	var events []string
	var final structs.TaskState
	hook := blockingHook{started: make(chan struct{})}
	tr := newTaskRunner(taskRunnerConfig{
		Alloc:          &structs.Allocation{ID: "a1", JobID: "j", TaskGroup: "g"},
		AllocDir:       t.TempDir(),
		JobName:        "j",
		Task:           &structs.Task{Name: "t"},
		Ctx:            context.Background(),
		LogMaxFiles:    2,
		LogMaxFileSize: 1 << 20,
		UpdateState: func(task string, e *structs.TaskEvent, mod func(ts *structs.TaskState)) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e.Type+": "+e.Message)
			if mod != nil {
				mod(&final)
			}
		},
		Prestart: []taskPrestartHook{hook},
	})
	tr.maxRun, tr.deadline = time.Second, time.Now()
	go func() {
		<-hook.started
		tr.expire()
	}()
	tr.run()
	mu.Lock()
	defer mu.Unlock()
	want := []string{structs.TaskEventSetup + ": Building Task Directory",
		structs.TaskEventDeadlineExceeded + ": Task exceeded its max_run_duration of 1s during its slow prestart hook, before it started; not restarting"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	if final.State != structs.TaskStateDead || !final.Failed {
		t.Fatalf("final state %+v, want dead and failed", final)
	}
}

// TestDeadlineExpiredBeforeItsTimerRuns: a deadline already past counts as
// expired even before the alloc runner's timer goroutine has run (on a
// loaded host it may not have), so a task runner never starts a task whose
// deadline passed while the client was down.
func TestDeadlineExpiredBeforeItsTimerRuns(t *testing.T) {
	d := &deadlineState{maxRun: time.Minute, deadline: time.Now().Add(-time.Second), expireCh: make(chan struct{})}
	if !d.expired() {
		t.Fatal("a deadline a second ago is not expired until its timer fires")
	}
	future := &deadlineState{maxRun: time.Minute, deadline: time.Now().Add(time.Hour), expireCh: make(chan struct{})}
	if future.expired() {
		t.Fatal("a deadline an hour away is expired")
	}
	none := &deadlineState{expireCh: make(chan struct{})}
	if none.expired() {
		t.Fatal("no deadline is expired")
	}
}
