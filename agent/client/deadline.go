package client

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// Deadlines (max_run_duration, structs/deadline.go) on the client: the
// alloc runner fixes the allocation's start (recorded in the state file,
// kept across client restarts), gives each task with a max_run_duration
// its deadline and arms one timer per distinct deadline, which expires
// every task that has it at once; a task runner stops an expired task as
// any stop (kill signal, then kill after kill_timeout) and ends it dead
// and failed, never restarted in place.

// pruneAllocStarts forgets the recorded starts no runner took: of
// allocations that finished, were stopped before they ran again, or are
// no longer on this node. Call after applyAllocs created the runners.
func (c *Client) pruneAllocStarts() {
	c.mu.Lock()
	var ids []string
	for id := range c.starts {
		ids = append(ids, id)
		delete(c.starts, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		if err := c.state.deleteAllocStart(id); err != nil {
			c.logger.Warn("forget allocation start", "alloc_id", id, "error", err)
		}
	}
}

// allocStart returns when the allocation started on this client: the
// start an earlier life recorded (unless it is in the future), else now,
// recorded. It records nothing, and returns the zero time, when no task
// of tg has a max_run_duration.
func (ar *allocRunner) allocStart(tg *structs.TaskGroup) time.Time {
	need := false
	for _, t := range tg.Tasks {
		if tg.TaskMaxRunDuration(t) > 0 {
			need = true
		}
	}
	if !need {
		return time.Time{}
	}
	now := time.Now()
	if ar.priorStart != 0 && ar.priorStart <= now.UnixNano() {
		return time.Unix(0, ar.priorStart)
	}
	// No start recorded, or one in the future: the wall clock moved back
	// while the client was down, and measuring from that start would
	// give the task that much more than its max_run_duration. Now it is.
	if err := ar.c.state.putAllocStart(ar.alloc.ID, now.UnixNano()); err != nil {
		ar.logger.Error("record allocation start; a client restart will measure max_run_duration from its own start", "error", err)
	}
	return now
}

// setDeadlines gives every task runner of tg with a max_run_duration its
// deadline, measured from start.
func (ar *allocRunner) setDeadlines(tg *structs.TaskGroup, start time.Time) {
	if start.IsZero() {
		return
	}
	for _, t := range tg.Tasks {
		if d := tg.TaskMaxRunDuration(t); d > 0 {
			if tr := ar.tasks[t.Name]; tr != nil {
				tr.maxRun, tr.deadline = d, start.Add(d)
			}
		}
	}
}

// armDeadlines starts a timer per distinct task deadline that expires, at
// once, every task runner with that deadline (a group's max_run_duration
// stops all its tasks together, each with its own event, before any
// failure kills its siblings). A deadline already past fires at once. The
// returned function stops the timers.
func (ar *allocRunner) armDeadlines() (stop func()) {
	byDeadline := map[int64][]*taskRunner{}
	for _, tr := range ar.tasks {
		if !tr.deadline.IsZero() {
			k := tr.deadline.UnixNano()
			byDeadline[k] = append(byDeadline[k], tr)
		}
	}
	timers := make([]*time.Timer, 0, len(byDeadline))
	for k, trs := range byDeadline {
		timers = append(timers, time.AfterFunc(time.Until(time.Unix(0, k)), func() {
			for _, tr := range trs {
				tr.expire()
			}
		}))
	}
	return func() {
		for _, t := range timers {
			t.Stop()
		}
	}
}

// deadlineState is a task runner's deadline: set before the task runs,
// expired by the alloc runner's timer.
type deadlineState struct {
	// maxRun is the task's max_run_duration and deadline when it must be
	// stopped; zero when it has none.
	maxRun   time.Duration
	deadline time.Time

	expireOnce sync.Once
	expireCh   chan struct{}
}

// expire tells the task its deadline passed.
func (d *deadlineState) expire() { d.expireOnce.Do(func() { close(d.expireCh) }) }

// expired reports whether the task's deadline passed: the alloc runner's
// timer fired, or the clock is past it already. The timer of a deadline
// already past fires "at once" on a goroutine of its own, which a loaded
// host may not run before the task runner's check, so the clock is read
// too (a task whose deadline passed while the client was down started in
// a loaded make test).
func (d *deadlineState) expired() bool {
	select {
	case <-d.expireCh:
		return true
	default:
		return !d.deadline.IsZero() && !time.Now().Before(d.deadline)
	}
}

// deadlineExceeded ends the task dead and failed with a Deadline Exceeded
// event; res is how the last run ended (nil when it was not running), how
// says what happened ("and was stopped", "before it started").
func (tr *taskRunner) deadlineExceeded(res *driver.ExitResult, how string) {
	msg := fmt.Sprintf("Task exceeded its max_run_duration of %s %s; not restarting", tr.maxRun, how)
	tr.logger.Info("task exceeded its max_run_duration", "max_run_duration", tr.maxRun, "deadline", tr.deadline)
	e := tr.event(structs.TaskEventDeadlineExceeded, msg, func(e *structs.TaskEvent) {
		e.Details = map[string]string{
			"max_run_duration": tr.maxRun.String(),
			"deadline":         tr.deadline.UTC().Format(time.RFC3339Nano),
		}
		if res != nil {
			e.ExitCode, e.Signal = res.ExitCode, res.Signal
		}
	})
	tr.setState(e, func(ts *structs.TaskState) {
		ts.State = structs.TaskStateDead
		ts.Failed = true
		ts.FinishedAt = time.Now().UnixNano()
		if res != nil {
			ts.ExitCode = res.ExitCode
		}
	})
}

// deadlineDescription is the allocation's client description when the
// tasks named failed at their deadline.
func deadlineDescription(tasks []string) string {
	if len(tasks) == 1 {
		return "Allocation exceeded max_run_duration: task " + tasks[0]
	}
	return "Allocation exceeded max_run_duration: tasks " + strings.Join(tasks, ", ")
}

// failedAtDeadline reports whether the task's last event is a Deadline
// Exceeded one.
func failedAtDeadline(ts *structs.TaskState) bool {
	if ts == nil || !ts.Failed || len(ts.Events) == 0 {
		return false
	}
	e := ts.Events[len(ts.Events)-1]
	return e != nil && e.Type == structs.TaskEventDeadlineExceeded
}
