package structs

// Evaluation statuses.
const (
	EvalStatusBlocked  = "blocked"
	EvalStatusPending  = "pending"
	EvalStatusComplete = "complete"
	EvalStatusFailed   = "failed"
	EvalStatusCanceled = "canceled"
)

// Evaluation triggers.
const (
	EvalTriggerJobRegister   = "job-register"
	EvalTriggerJobDeregister = "job-deregister"
	EvalTriggerNodeUpdate    = "node-update"
	EvalTriggerAllocStop     = "alloc-stop"
	EvalTriggerRetryFailed   = "failed-follow-up"
	EvalTriggerQueuedAllocs  = "queued-allocs"
	EvalTriggerMaxPlans      = "max-plan-attempts"
	// EvalTriggerRescheduleLater marks the follow-up evaluation the
	// scheduler creates for a failed allocation whose reschedule delay has
	// not yet passed; its WaitUntil is the time the delay ends.
	EvalTriggerRescheduleLater = "reschedule-later"
	// EvalTriggerPeriodicJob marks the evaluation of a periodic job's
	// launched child (Nomad's name).
	EvalTriggerPeriodicJob = "periodic-job"
)

// Evaluation asks the scheduler to reconcile one job with the cluster.
type Evaluation struct {
	ID                string
	Namespace         string
	Priority          int
	Type              string // the job's type; picks the scheduler
	TriggeredBy       string
	JobID             string
	JobModifyIndex    uint64
	NodeID            string
	Status            string
	StatusDescription string
	NextEval          string
	PreviousEval      string
	// BlockedEval is the ID of the blocked evaluation this one created for
	// groups that did not fit.
	BlockedEval string
	// FailedTGAllocs explains, per task group, why placement failed.
	FailedTGAllocs map[string]*AllocMetric
	// QueuedAllocations counts, per task group, allocations still waiting.
	QueuedAllocations map[string]int
	// SnapshotIndex is the state index the scheduler saw.
	SnapshotIndex uint64
	CreateIndex   uint64
	ModifyIndex   uint64
	// CreateTime and ModifyTime are Unix nanoseconds, set by endpoints.
	CreateTime int64
	ModifyTime int64
	// WaitUntil, Unix nanoseconds, holds a pending evaluation in the eval
	// broker until that time (0: deliver at once). The scheduler reads the
	// later of ModifyTime and WaitUntil as the evaluation's "now" (see
	// EvalTime).
	WaitUntil int64
}

// EvalTime returns the time, Unix nanoseconds, the scheduler takes as "now"
// for this evaluation: the later of ModifyTime (stamped by the endpoint or
// worker that wrote it) and WaitUntil (the broker does not deliver it
// before then). The scheduler reads no clock, so every server computes the
// same plan from the same evaluation; an evaluation processed late sees an
// older "now" and at worst schedules a follow-up that is already due.
func (e *Evaluation) EvalTime() int64 {
	return max(e.ModifyTime, e.WaitUntil)
}

// TerminalStatus reports whether the evaluation is finished.
func (e *Evaluation) TerminalStatus() bool {
	switch e.Status {
	case EvalStatusComplete, EvalStatusFailed, EvalStatusCanceled:
		return true
	}
	return false
}

// Copy returns a deep copy.
func (e *Evaluation) Copy() *Evaluation {
	if e == nil {
		return nil
	}
	n := *e
	if e.FailedTGAllocs != nil {
		n.FailedTGAllocs = make(map[string]*AllocMetric, len(e.FailedTGAllocs))
		for k, m := range e.FailedTGAllocs {
			n.FailedTGAllocs[k] = m.Copy()
		}
	}
	if e.QueuedAllocations != nil {
		n.QueuedAllocations = make(map[string]int, len(e.QueuedAllocations))
		for k, v := range e.QueuedAllocations {
			n.QueuedAllocations[k] = v
		}
	}
	return &n
}

// AllocMetric explains a placement attempt: how many nodes were looked at,
// and for those that did not fit, why ("missing driver \"docker\"",
// "devices: nvidia/gpu", "memory", "cpu"), counted per reason.
type AllocMetric struct {
	NodesEvaluated int
	NodesFiltered  int
	NodesExhausted int
	// ConstraintFiltered counts nodes removed by each failing constraint or
	// feasibility check.
	ConstraintFiltered map[string]int
	// DimensionExhausted counts nodes that passed feasibility but lacked
	// free capacity in a dimension ("cpu", "memory", "devices: nvidia/gpu").
	DimensionExhausted map[string]int
	// CoalescedFailures counts further allocations of the group that failed
	// for the same reasons.
	CoalescedFailures int
	// Explanation is Explain's rendering of the reasons, set by the
	// scheduler: "5 nodes: not enough free GPU memory (nvidia/gpu); 2:
	// reserved 'voice'".
	Explanation string `json:",omitempty"`
	// AwaitingStops counts how many of the group's unplaced allocations
	// (1 + CoalescedFailures) fit once allocations being stopped or
	// evicted release their resources (a destructive update on a node
	// with no spare GPU, a preemption); the blocked evaluation places them
	// then. When it covers them all, nothing lacks capacity: `job run`
	// waits for the blocked evaluation rather than report a failure.
	AwaitingStops int `json:",omitempty"`
}

// Copy returns a deep copy.
func (m *AllocMetric) Copy() *AllocMetric {
	if m == nil {
		return nil
	}
	n := *m
	n.ConstraintFiltered = cloneIntMap(m.ConstraintFiltered)
	n.DimensionExhausted = cloneIntMap(m.DimensionExhausted)
	return &n
}

func cloneIntMap(m map[string]int) map[string]int {
	if m == nil {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
