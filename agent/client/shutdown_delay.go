package client

import (
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Shutdown delays (structs/shutdown_delay.go): an allocation the servers
// stop has its services deregistered and, as an endpoint member, left its
// router's rotation (allocRunner.stopTasks) before this runs; then the
// group's delay passes, then each task's own, and only then is the task
// sent its kill signal. The wait runs in a goroutine of its own, so the
// allocation watch that asked for the stop goes on. A client shutting down,
// or a stop the servers mark DesiredTransition.NoShutdownDelay (a node
// drain's deadline), cuts the wait short (cutShutdownDelay) and kills at
// once.

// killAfterShutdownDelay starts the delayed kills of trs when the group
// or any of its tasks has a shutdown_delay, and reports whether it did
// (false: the caller kills at once). Each task still alive gets a
// TaskEventWaitingShutdownDelay event saying how long it waits.
func (ar *allocRunner) killAfterShutdownDelay(trs []*taskRunner) bool {
	if ar.alloc.Job == nil || ar.shutdownDelayCut() {
		return false
	}
	tg := ar.alloc.Job.LookupTaskGroup(ar.alloc.TaskGroup)
	if tg == nil {
		return false
	}
	groupDelay := max(tg.ShutdownDelay, 0)
	waits := make([]time.Duration, len(trs))
	any := false
	for i, tr := range trs {
		// A task not running yet (still setting up) or already dead has
		// no one to let finish: it is stopped at once.
		if !ar.taskRunning(tr.task.Name) {
			continue
		}
		waits[i] = groupDelay + max(tr.task.ShutdownDelay, 0)
		any = any || waits[i] > 0
	}
	if !any {
		return false
	}
	now := time.Now().UnixNano()
	for i, tr := range trs {
		if waits[i] <= 0 {
			continue
		}
		msg := fmt.Sprintf("Waiting for shutdown_delay of %s before killing the task", waits[i])
		ar.updateTask(tr.task.Name, &structs.TaskEvent{Type: structs.TaskEventWaitingShutdownDelay, Time: now,
			Message: msg, DisplayMessage: msg}, nil)
	}
	ar.logger.Info("waiting for shutdown delay before stopping the tasks", "group_delay", groupDelay)
	for i, tr := range trs {
		go ar.killAfter(tr, waits[i])
	}
	return true
}

// killAfter kills tr once d has passed, at once when the client shuts
// down, and not at all when the task is already done.
func (ar *allocRunner) killAfter(tr *taskRunner, d time.Duration) {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ar.delayCut:
		case <-tr.done:
			return
		}
	}
	tr.kill()
}

// taskRunning reports whether the task's state is running.
func (ar *allocRunner) taskRunning(task string) bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	ts := ar.taskStates[task]
	return ts != nil && ts.State == structs.TaskStateRunning
}

// shutdownDelayCut reports whether cutShutdownDelay ran: a stop from then
// on does not wait.
func (ar *allocRunner) shutdownDelayCut() bool {
	select {
	case <-ar.delayCut:
		return true
	default:
		return false
	}
}

// cutShutdownDelay ends every shutdown_delay wait of the allocation, and
// any to come.
func (ar *allocRunner) cutShutdownDelay() {
	ar.delayCutOnce.Do(func() {
		if ar.delayCut != nil {
			close(ar.delayCut)
		}
	})
}
