package api

import "time"

// Evaluation statuses.
const (
	EvalStatusBlocked  = "blocked"
	EvalStatusPending  = "pending"
	EvalStatusComplete = "complete"
	EvalStatusFailed   = "failed"
	EvalStatusCanceled = "canceled"
)

// Evaluation asks the scheduler to reconcile one job with the cluster.
type Evaluation struct {
	ID                string
	Namespace         string
	Priority          int
	Type              string
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
	SnapshotIndex     uint64
	CreateIndex       uint64
	ModifyIndex       uint64
	// CreateTime and ModifyTime are Unix nanoseconds.
	CreateTime int64
	ModifyTime int64
	// WaitUntil, an RFC 3339 time in JSON, is when a pending evaluation
	// is delivered to a scheduler (the zero time: at once), e.g. a
	// "reschedule-later" evaluation waiting for a reschedule delay.
	WaitUntil time.Time
}

// TerminalStatus reports whether the evaluation is finished.
func (e *Evaluation) TerminalStatus() bool {
	switch e.Status {
	case EvalStatusComplete, EvalStatusFailed, EvalStatusCanceled:
		return true
	}
	return false
}

// AllocMetric explains a placement attempt: how many nodes were looked at
// and, for those that did not fit, why, counted per reason.
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
	// Explanation is the reasons in words, e.g. "5 nodes: not enough free
	// GPU memory (nvidia/gpu); 2: reserved 'voice'".
	Explanation string `json:",omitempty"`
	// AwaitingStops counts how many of the unplaced allocations fit once
	// allocations being stopped or evicted release their resources; the
	// blocked evaluation places them then.
	AwaitingStops int `json:",omitempty"`
}

// JobRegisterResponse answers a job registration. Index is the Raft index
// of the write.
type JobRegisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Warnings        string
	Index           uint64
}

// JobDeregisterResponse answers a job stop or purge. Index is the Raft
// index of the write.
type JobDeregisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Index           uint64
}
