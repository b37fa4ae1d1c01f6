package structs

import (
	"fmt"
	"time"
)

// Shutdown delays, as Nomad's group and task shutdown_delay: when an
// allocation is told to stop, the client first takes its services out of
// discovery (and an endpoint member out of its router's rotation), then
// waits the group's ShutdownDelay, then each task waits its own
// ShutdownDelay before it is sent its kill signal. The wait lets callers
// that already hold the address, and requests already in flight (an
// endpoint member's answers in progress), finish. A client shutting down
// does not wait: it stops the tasks at once. A stop from a task failure,
// a deadline (max_run_duration) or an idle-GPU reclaim does not either,
// nor an eviction for a higher-priority job (the preemptor is placed on
// the freed GPUs at once), nor a stop marked
// DesiredTransition.NoShutdownDelay (a node drain's deadline), which also
// cuts a wait already begun.

// ShutdownDelayLimit caps a group's and a task's shutdown_delay: one
// hour. Nomad sets no bound; an unbounded one would let a stopped job hold
// its node's resources (which the scheduler already counts as free)
// for as long as it likes.
const ShutdownDelayLimit = time.Hour

// TaskEventWaitingShutdownDelay is the event of a task whose kill waits
// for its group's and its own shutdown_delay (Nomad's
// TaskWaitingShuttingDownDelay, same text).
const TaskEventWaitingShutdownDelay = "Waiting for shutdown delay"

// shutdownDelayProblems returns the problems of the group's and its
// tasks' shutdown_delay, named as `shutdown_delay: ...` and
// `task "t": shutdown_delay: ...` (the caller adds the group).
func shutdownDelayProblems(tg *TaskGroup) []string {
	var p []string
	if msg := shutdownDelayProblem(tg.ShutdownDelay); msg != "" {
		p = append(p, "shutdown_delay: "+msg)
	}
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		if msg := shutdownDelayProblem(t.ShutdownDelay); msg != "" {
			p = append(p, fmt.Sprintf("task %q: shutdown_delay: %s", clip(t.Name), msg))
		}
	}
	return p
}

// shutdownDelayProblem returns why d cannot be a shutdown_delay, or "".
func shutdownDelayProblem(d time.Duration) string {
	switch {
	case d < 0:
		return fmt.Sprintf("must not be negative, got %s", d)
	case d > ShutdownDelayLimit:
		return fmt.Sprintf("at most %s, got %s", ShutdownDelayLimit, d)
	}
	return ""
}
