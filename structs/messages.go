package structs

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// MessageType is the first byte of every Raft log entry. Values are
// append-only: never renumber or reuse one.
type MessageType uint8

// Raft message types.
const (
	NodeRegisterRequestType      MessageType = 0
	NodeDeregisterRequestType    MessageType = 1
	NodeUpdateStatusRequestType  MessageType = 2
	JobRegisterRequestType       MessageType = 3
	JobDeregisterRequestType     MessageType = 4
	EvalUpdateRequestType        MessageType = 5
	EvalDeleteRequestType        MessageType = 6
	ApplyPlanResultsRequestType  MessageType = 7
	AllocClientUpdateRequestType MessageType = 8
	GCPurgeRequestType           MessageType = 9
	ACLPolicyUpsertRequestType   MessageType = 10
	ACLPolicyDeleteRequestType   MessageType = 11
	ACLTokenUpsertRequestType    MessageType = 12
	ACLTokenDeleteRequestType    MessageType = 13
	ACLBootstrapRequestType      MessageType = 14
	NodeSecretRotateRequestType  MessageType = 15
	ArtifactUpsertRequestType    MessageType = 16
	ArtifactDeleteRequestType    MessageType = 17

	// Service registrations (structs/service.go): 28-31.
	ServiceRegistrationUpsertRequestType          MessageType = 28
	ServiceRegistrationDeleteByIDRequestType      MessageType = 29
	ServiceRegistrationDeleteByAllocIDRequestType MessageType = 30
	// Job versions and deployments (structs/job_versions.go,
	// structs/deployment.go).
	JobStabilityRequestType           MessageType = 22
	DeploymentStatusUpdateRequestType MessageType = 23
	DeploymentPromoteRequestType      MessageType = 24
	DeploymentAllocHealthRequestType  MessageType = 25
	// Periodic and parameterized jobs (structs/job_children.go).
	PeriodicLaunchRequestType     MessageType = 18
	JobDispatchRequestType        MessageType = 19
	JobChildrenReleaseRequestType MessageType = 20
	// Endpoint aliases (structs/endpoint_alias.go): 21 and 26.
	EndpointAliasPromoteRequestType MessageType = 21
	EndpointAliasDeleteRequestType  MessageType = 26
	// Node pools (structs/node_pool.go): 27 and 31.
	NodePoolUpsertRequestType MessageType = 27
	NodePoolDeleteRequestType MessageType = 31
	// Provisioning (structs/provision.go): 32-34.
	ProvisionRequestUpsertRequestType MessageType = 32
	ProvisionResultRequestType        MessageType = 33
	ProvisionRequestDeleteRequestType MessageType = 34
)

// IgnoreUnknownTypeFlag is set on message types that older servers may
// skip when they do not know them. A type without the flag that the FSM
// does not know stops it loudly.
const IgnoreUnknownTypeFlag MessageType = 128

// String names the message type.
func (t MessageType) String() string {
	switch t &^ IgnoreUnknownTypeFlag {
	case NodeRegisterRequestType:
		return "NodeRegister"
	case NodeDeregisterRequestType:
		return "NodeDeregister"
	case NodeUpdateStatusRequestType:
		return "NodeUpdateStatus"
	case JobRegisterRequestType:
		return "JobRegister"
	case JobDeregisterRequestType:
		return "JobDeregister"
	case EvalUpdateRequestType:
		return "EvalUpdate"
	case EvalDeleteRequestType:
		return "EvalDelete"
	case ApplyPlanResultsRequestType:
		return "ApplyPlanResults"
	case AllocClientUpdateRequestType:
		return "AllocClientUpdate"
	case GCPurgeRequestType:
		return "GCPurge"
	case ACLPolicyUpsertRequestType:
		return "ACLPolicyUpsert"
	case ACLPolicyDeleteRequestType:
		return "ACLPolicyDelete"
	case ACLTokenUpsertRequestType:
		return "ACLTokenUpsert"
	case ACLTokenDeleteRequestType:
		return "ACLTokenDelete"
	case ACLBootstrapRequestType:
		return "ACLBootstrap"
	case NodeSecretRotateRequestType:
		return "NodeSecretRotate"
	case ArtifactUpsertRequestType:
		return "ArtifactUpsert"
	case ArtifactDeleteRequestType:
		return "ArtifactDelete"
	// Service registrations.
	case ServiceRegistrationUpsertRequestType:
		return "ServiceRegistrationUpsert"
	case ServiceRegistrationDeleteByIDRequestType:
		return "ServiceRegistrationDeleteByID"
	case ServiceRegistrationDeleteByAllocIDRequestType:
		return "ServiceRegistrationDeleteByAllocID"
	// Job versions and deployments.
	case JobStabilityRequestType:
		return "JobStability"
	case DeploymentStatusUpdateRequestType:
		return "DeploymentStatusUpdate"
	case DeploymentPromoteRequestType:
		return "DeploymentPromote"
	case DeploymentAllocHealthRequestType:
		return "DeploymentAllocHealth"
	// Periodic and parameterized jobs.
	case PeriodicLaunchRequestType:
		return "PeriodicLaunch"
	case JobDispatchRequestType:
		return "JobDispatch"
	case JobChildrenReleaseRequestType:
		return "JobChildrenRelease"
	// Endpoint aliases.
	case EndpointAliasPromoteRequestType:
		return "EndpointAliasPromote"
	case EndpointAliasDeleteRequestType:
		return "EndpointAliasDelete"
	// Node pools.
	case NodePoolUpsertRequestType:
		return "NodePoolUpsert"
	case NodePoolDeleteRequestType:
		return "NodePoolDelete"
	// Provisioning.
	case ProvisionRequestUpsertRequestType:
		return "ProvisionRequestUpsert"
	case ProvisionResultRequestType:
		return "ProvisionResult"
	case ProvisionRequestDeleteRequestType:
		return "ProvisionRequestDelete"
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// NodeRegisterRequest registers or re-registers a node.
type NodeRegisterRequest struct {
	Node *Node
}

// NodeDeregisterRequest removes a node.
type NodeDeregisterRequest struct {
	NodeID string
}

// NodeUpdateStatusRequest sets a node's status (heartbeat or down), with
// evaluations to create for the node's jobs.
type NodeUpdateStatusRequest struct {
	NodeID string
	Status string
	// UpdatedAt is Unix nanoseconds, as in every message's UpdatedAt; the
	// node's StatusUpdatedAt stores it in seconds (UpdatedAtUnix).
	UpdatedAt int64
	Evals     []*Evaluation
}

// legacySecondsBelow is the bound under which a message's UpdatedAt is
// taken as Unix seconds: entries written before every UpdatedAt became
// nanoseconds carried seconds (1e15 ns is January 1970; 1e15 s is tens of
// millions of years away).
const legacySecondsBelow = 1_000_000_000_000_000

// UpdatedAtUnix returns UpdatedAt in Unix seconds, reading a value written
// in seconds by an older version as seconds.
func (r *NodeUpdateStatusRequest) UpdatedAtUnix() int64 {
	if r.UpdatedAt < legacySecondsBelow {
		return r.UpdatedAt
	}
	return r.UpdatedAt / 1_000_000_000
}

// JobRegisterRequest upserts a job and its evaluation in one entry.
type JobRegisterRequest struct {
	Job  *Job
	Eval *Evaluation
	// PriorVersion, when set, makes the register apply only while the
	// stored job's version is this one (a revert's EnforcePriorVersion,
	// checked at apply so racing writes cannot both pass); otherwise the
	// entry fails with ErrInvalid and changes nothing.
	PriorVersion *uint64 `json:",omitempty"`
}

// JobDeregisterRequest stops a job (or, with Purge, removes it and its
// allocations and evaluations) and creates its evaluation.
type JobDeregisterRequest struct {
	JobID string
	Purge bool
	Eval  *Evaluation
}

// EvalUpdateRequest upserts evaluations (status changes, blocked and
// follow-up evaluations).
type EvalUpdateRequest struct {
	Evals []*Evaluation
}

// EvalDeleteRequest removes evaluations and allocations (garbage collection).
type EvalDeleteRequest struct {
	Evals  []string
	Allocs []string
}

// ApplyPlanResultsRequest commits a verified plan: allocations to stop and
// to place, and the evaluation updates that go with it.
type ApplyPlanResultsRequest struct {
	// AllocsStopped holds the stop updates (DesiredStatus stop/evict).
	AllocsStopped []*Allocation
	// AllocsPlaced holds new or updated allocations. A placement whose Job
	// is nil belongs to Job below (or, when that is nil or another job, to
	// the stored job), so the job travels once per entry, not once per
	// allocation.
	AllocsPlaced []*Allocation
	// Job is the job version the placements were planned for.
	Job    *Job
	EvalID string
	// Evals are upserted with the plan (e.g. a blocked evaluation).
	Evals []*Evaluation
	// UpdatedAt is Unix nanoseconds, used as ModifyTime.
	UpdatedAt int64
	// Deployment and DeploymentUpdates are the plan's (structs.Plan).
	Deployment        *Deployment               `json:",omitempty"`
	DeploymentUpdates []*DeploymentStatusUpdate `json:",omitempty"`
}

// AllocClientUpdateRequest carries client-side status (ClientStatus,
// TaskStates) of allocations, and evaluations to create because resources
// were freed.
type AllocClientUpdateRequest struct {
	Allocs []*Allocation
	Evals  []*Evaluation
	// UpdatedAt is Unix nanoseconds.
	UpdatedAt int64
}

// GCPurgeRequest removes the jobs and nodes the leader's garbage collector
// found eligible (server/core_gc.go). Each removal is conditional: it
// happens only while the stored object still has the ModifyIndex the leader
// saw, so a job registered again or a node that came back between the
// leader's decision and this entry is left alone. The leader decides with
// its clock; the FSM compares indexes only.
type GCPurgeRequest struct {
	Jobs  []*GCJobPurge
	Nodes []*GCNodePurge
}

// GCJobPurge purges one job together with the evaluations and allocations
// listed, all or nothing: when the job is missing or its ModifyIndex
// differs, none of them is removed.
type GCJobPurge struct {
	JobID       string
	ModifyIndex uint64
	Evals       []string
	Allocs      []string
}

// GCNodePurge deregisters one node if its ModifyIndex is still
// ModifyIndex.
type GCNodePurge struct {
	NodeID      string
	ModifyIndex uint64
}

// PeriodicLaunchRequest launches a periodic job's child. The leader
// decides the time (Launch, Unix seconds: the cron slot, or the moment of
// a forced launch) and builds Child (ID PeriodicChildID(ParentID, Launch))
// and its Eval; the FSM applies it only if no job with Child's ID exists,
// and, for a scheduled launch (Forced false), only when Launch is later
// than the parent's recorded last launch and, with prohibit_overlap, no
// child is alive. A scheduled launch records Launch as the parent's last
// launch, even when it was skipped, so no later leader decides that time
// again.
type PeriodicLaunchRequest struct {
	ParentID string
	Launch   int64
	Forced   bool
	Child    *Job
	Eval     *Evaluation
}

// JobDispatchRequest registers a dispatched child of a parameterized job
// with its Eval. When Child carries an idempotency token that an existing
// child of the same parent has, nothing is written and the answer names
// that child.
type JobDispatchRequest struct {
	Child *Job
	Eval  *Evaluation
}

// JobChildrenReleaseRequest starts held children of ParentID: the FSM
// releases, oldest first, as many held children as the parent's
// max_running_children leaves room for, each one that has an evaluation in
// Evals (keyed by the evaluation's JobID), and upserts those evaluations.
type JobChildrenReleaseRequest struct {
	ParentID string
	Evals    []*Evaluation
}

// MsgpackHandle is the codec used for Raft entries, snapshots and the
// client's local state. Maps decode to map[string]interface{} and raw
// bytes to strings so task Config survives a round trip.
var MsgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.WriteExt = true
	h.MapType = mapStringInterfaceType
	return h
}()

// Encode writes the message type byte then msg as msgpack.
func Encode(t MessageType, msg interface{}) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(uint8(t))
	if err := codec.NewEncoder(&buf, MsgpackHandle).Encode(msg); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return buf.Bytes(), nil
}

// ErrDecode is wrapped by Decode's errors.
var ErrDecode = errors.New("decode")

// Decode reads msgpack bytes (without the type byte) into out. It returns
// an error wrapping ErrDecode for malformed input and never panics.
func Decode(buf []byte, out interface{}) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic in msgpack decoder: %v", ErrDecode, r)
		}
	}()
	if err := codec.NewDecoderBytes(buf, MsgpackHandle).Decode(out); err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return nil
}
