package structs

import (
	"fmt"
	"time"
)

// Deadlines (max_run_duration), after Nomad 2.0.2's group
// max_run_duration for batch jobs (hashicorp/nomad#27803, resolving
// #1782). A batch group or task may set a MaxRunDuration; the client
// measures it from the allocation's start on that client (recorded in
// its local state, so a restarted client keeps the same deadline) and,
// once it passes, stops every task still running with the task's kill
// signal and kill timeout, as any stop.
//
// Where we differ from Nomad: Nomad marks such an allocation complete;
// here a task stopped at its deadline is dead and failed (event
// TaskEventDeadlineExceeded), so the allocation is failed and the group's
// reschedule policy decides whether a new allocation, with a deadline of
// its own, replaces it. The task is never restarted in place: the
// deadline belongs to the allocation, is not reset by a restart, and has
// passed. A task may also set its own MaxRunDuration (Nomad has only the
// group's); the shorter of the two applies.

// TaskEventDeadlineExceeded is the final event of a task stopped because
// its allocation ran past its max_run_duration.
const TaskEventDeadlineExceeded = "Deadline Exceeded"

// MaxRunDurationLimit caps max_run_duration: 365 days. It keeps the
// deadline's arithmetic (start + duration, in Unix nanoseconds) far from
// overflow; a batch task meant to run longer than a year has no deadline.
const MaxRunDurationLimit = 365 * 24 * time.Hour

// TaskMaxRunDuration returns the max_run_duration that applies to task t
// of group tg: the shorter of the group's and the task's, ignoring a zero
// (unset) one; zero when neither is set.
func (tg *TaskGroup) TaskMaxRunDuration(t *Task) time.Duration {
	d := tg.MaxRunDuration
	if t != nil && t.MaxRunDuration > 0 && (d <= 0 || t.MaxRunDuration < d) {
		d = t.MaxRunDuration
	}
	if d < 0 {
		return 0
	}
	return d
}

// deadlineProblems returns the problems of the group's and its tasks'
// max_run_duration, named as `max_run_duration: ...` and
// `task "t": max_run_duration: ...` (the caller adds the group).
func deadlineProblems(jobType string, tg *TaskGroup) []string {
	var p []string
	if msg := maxRunDurationProblem(jobType, tg.MaxRunDuration); msg != "" {
		p = append(p, "max_run_duration: "+msg)
	}
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		if msg := maxRunDurationProblem(jobType, t.MaxRunDuration); msg != "" {
			p = append(p, fmt.Sprintf("task %q: max_run_duration: %s", clip(t.Name), msg))
		}
	}
	return p
}

// maxRunDurationProblem returns why d cannot be a max_run_duration of a
// job of jobType, or "" (zero, unset, is fine anywhere).
func maxRunDurationProblem(jobType string, d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d < 0:
		return fmt.Sprintf("must be more than zero, got %s", d)
	case d > MaxRunDurationLimit:
		return fmt.Sprintf("at most %s (365 days), got %s", MaxRunDurationLimit, d)
	case jobType != JobTypeBatch:
		return fmt.Sprintf("only batch jobs may set it (as in Nomad, which allows it on batch and sysbatch jobs); this job's type is %q", jobType)
	}
	return ""
}
