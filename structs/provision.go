package structs

import "fmt"

// This file holds the Raft messages of provisioning (issue 16): the
// leader records provision requests (ProvisionRequestUpsertRequest), the
// executor applies each provider answer only while the request is
// unchanged (ProvisionResultRequest, a compare-and-set on ModifyIndex),
// and finished requests are garbage-collected
// (ProvisionRequestDeleteRequest).

// Bounds on provisioning messages, so an entry stays small.
const (
	// MaxProvisionRequestsPerEntry bounds the requests of one upsert (a
	// gang's set fits: MaxPoolNodes).
	MaxProvisionRequestsPerEntry = MaxPoolNodes
	// MaxProvisionErrorLen bounds a request's Error in bytes; a longer
	// provider error is cut.
	MaxProvisionErrorLen = 2048
	// MaxProvisionReasonLen bounds a request's Reason in bytes.
	MaxProvisionReasonLen = 512
)

// ProvisionRequestUpsertRequest records provision requests in one Raft
// entry: one scaling decision, e.g. the whole set of a gang, is written
// at once or not at all.
type ProvisionRequestUpsertRequest struct {
	Requests []*ProvisionRequest
}

// ProvisionResultRequest is a provider's answer (or a status change the
// leader decided, such as a cancel) for one request. The FSM applies it
// only when the stored request's ModifyIndex equals ExpectedIndex, the
// index the executor read before it called the provider; otherwise the
// answer is stale (the request changed meanwhile) and is dropped.
type ProvisionResultRequest struct {
	ID            string
	ExpectedIndex uint64
	Status        string
	Error         string
	HostID        string
	Attempts      int
	NextAttempt   int64
	// UpdatedAt is the answer's time, Unix nanoseconds (the request's
	// ModifyTime).
	UpdatedAt int64
}

// ProvisionResultResponse is the FSM's response to a ProvisionResultRequest:
// Applied is false when the answer was stale and dropped.
type ProvisionResultResponse struct {
	Applied bool
}

// ProvisionRequestDeleteRequest removes finished provision requests.
type ProvisionRequestDeleteRequest struct {
	IDs []string
}

// Validate checks a request before it is recorded. Errors wrap
// ErrInvalid and name the field.
func (r *ProvisionRequest) Validate() error {
	var p []string
	switch {
	case r.ID == "" || len(r.ID) > 128:
		p = append(p, "ID: must be 1-128 characters")
	case r.Pool == "" || len(r.Pool) > 128:
		p = append(p, "Pool: must be 1-128 characters")
	}
	switch r.Op {
	case ProvisionOpCreate, ProvisionOpTerminate:
	default:
		p = append(p, fmt.Sprintf("Op: %q is not create or terminate", r.Op))
	}
	if !validProvisionStatus(r.Status) {
		p = append(p, fmt.Sprintf("Status: %q is not a provision status", r.Status))
	}
	if r.Op == ProvisionOpTerminate && r.HostID == "" {
		p = append(p, "HostID: is required to terminate")
	}
	if len(r.IdempotencyKey) > 256 || len(r.HostID) > 256 || len(r.NodeName) > 256 || len(r.GroupKey) > 128 {
		p = append(p, "IdempotencyKey, HostID, NodeName: at most 256 characters; GroupKey: at most 128")
	}
	if len(r.Reason) > MaxProvisionReasonLen {
		p = append(p, fmt.Sprintf("Reason: at most %d bytes", MaxProvisionReasonLen))
	}
	if len(r.Error) > MaxProvisionErrorLen {
		p = append(p, fmt.Sprintf("Error: at most %d bytes", MaxProvisionErrorLen))
	}
	if r.Attempts < 0 {
		p = append(p, "Attempts: must not be negative")
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

// Validate checks a result before it is applied. Errors wrap ErrInvalid.
func (r *ProvisionResultRequest) Validate() error {
	var p []string
	if r.ID == "" {
		p = append(p, "ID: is required")
	}
	if !validProvisionStatus(r.Status) {
		p = append(p, fmt.Sprintf("Status: %q is not a provision status", r.Status))
	}
	if len(r.Error) > MaxProvisionErrorLen {
		p = append(p, fmt.Sprintf("Error: at most %d bytes", MaxProvisionErrorLen))
	}
	if len(r.HostID) > 256 {
		p = append(p, "HostID: at most 256 characters")
	}
	if r.Attempts < 0 {
		p = append(p, "Attempts: must not be negative")
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

func validProvisionStatus(s string) bool {
	switch s {
	case ProvisionStatusPending, ProvisionStatusComplete, ProvisionStatusFailed, ProvisionStatusCanceled:
		return true
	}
	return false
}

// Copy returns a copy of the request (it holds no reference fields).
func (r *ProvisionRequest) Copy() *ProvisionRequest {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// Finished reports whether the request needs no further provider call:
// complete or canceled.
func (r *ProvisionRequest) Finished() bool {
	return r.Status == ProvisionStatusComplete || r.Status == ProvisionStatusCanceled
}

// TruncateProvisionError cuts s to MaxProvisionErrorLen bytes.
func TruncateProvisionError(s string) string {
	if len(s) <= MaxProvisionErrorLen {
		return s
	}
	return s[:MaxProvisionErrorLen-3] + "..."
}

// Node states in a NodePoolStatus.
const (
	PoolNodeIdle     = "idle"     // ready, nothing running
	PoolNodeBusy     = "busy"     // runs allocations
	PoolNodeDraining = "draining" // draining or drained (ineligible)
	PoolNodeDown     = "down"     // not ready
	PoolNodeJoining  = "joining"  // the host exists, its node has not registered
)

// MaxPoolDecisions bounds the decisions a NodePoolStatus lists.
const MaxPoolDecisions = 20

// NodePoolStatus is what `node pool status` shows of one pool: its nodes,
// pending requests, last decisions and failed provider calls.
type NodePoolStatus struct {
	Pool *NodePool
	// Hosts counts the pool's provisioned hosts (live creates).
	Hosts     int
	Nodes     []NodePoolStatusNode
	Pending   []*ProvisionRequest
	Decisions []NodePoolDecision
	// Failed are requests whose last provider call failed (retrying) or
	// that gave up, newest first.
	Failed []*ProvisionRequest
	// Waiting says why blocked work of the pool gets no new hosts (a
	// group the shape cannot place, a gang larger than Max leaves room
	// for, demand beyond Max), one line each of at most
	// MaxProvisionReasonLen bytes, at most MaxPoolDecisions.
	Waiting []PoolWait `json:",omitempty"`
}

// PoolWait is one line of NodePoolStatus.Waiting.
type PoolWait struct {
	// Namespace is the namespace of the job the line names, so a reader
	// shows it only to who may list that namespace's jobs; empty for a
	// line that names no job.
	Namespace string `json:",omitempty"`
	Reason    string
}

// NodePoolStatusNode is one node (or joining host) of a pool.
type NodePoolStatusNode struct {
	Name   string
	NodeID string `json:",omitempty"`
	HostID string `json:",omitempty"`
	State  string
	Allocs int
}

// NodePoolDecision is one recorded decision: the requests of one Raft entry.
type NodePoolDecision struct {
	Index  uint64
	Time   int64 // Unix nanoseconds
	Op     string
	Count  int
	Reason string
}
