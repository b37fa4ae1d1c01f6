package structs

import (
	"fmt"
	"time"
)

// HeaderNodeSecret carries a client node's SecretID on the node routes of
// the HTTP API (register, heartbeat, allocation watch and updates). The
// server compares it with the SecretID stored for the node.
const HeaderNodeSecret = "X-Gpulayer-Node-Secret"

// NodeRegisterHTTPRequest is the body of PUT /v1/node/register. Node's
// SecretID is not part of Node's JSON encoding, so the secret travels
// explicitly in SecretID.
type NodeRegisterHTTPRequest struct {
	Node     *Node
	SecretID string
}

// NodeHeartbeatHTTPRequest is the body of PUT /v1/node/{id}/heartbeat: the
// status the node reports (NodeStatusReady normally) and, optionally, its
// GPUs' latest telemetry (bounded by ValidateGPUUsage; kept in the
// leader's memory for node pools' GPU idleness rules, never in Raft).
type NodeHeartbeatHTTPRequest struct {
	Status string
	GPUs   []*GPUUsage `json:",omitempty"`
}

// NodeHeartbeatHTTPResponse answers a node registration or heartbeat:
// the node must send its next heartbeat within HeartbeatTTL (nanoseconds in
// JSON, as Go encodes a time.Duration; Nomad's field has the same name and
// encoding).
type NodeHeartbeatHTTPResponse struct {
	HeartbeatTTL time.Duration
}

// NodeUpdateAllocsHTTPRequest is the body of POST /v1/node/{id}/allocations
// (JSON, or ContentTypeNodeMsgpack): client-side status of allocations on
// that node. ID, NodeID, ClientStatus, ClientDescription, TaskStates,
// Outputs, LogArchive, DeploymentStatus (its Healthy and Timestamp) and
// EndpointMember are read (server.UpdateAllocs); other fields are ignored.
type NodeUpdateAllocsHTTPRequest struct {
	Allocs []*Allocation
}

// Node allocation changes: the client-only pair of routes a client reads
// its allocations through (Nomad's Node.GetClientAllocs, then
// Alloc.GetAllocs for what changed), so a poll does not return every
// finished allocation with its whole job each time.
//
//	GET  /v1/node/{id}/client-allocs        NodeClientAllocsHTTPResponse (blocking query)
//	POST /v1/node/{id}/client-allocs/fetch  body NodeFetchAllocsHTTPRequest, answer NodeFetchAllocsHTTPResponse

// MaxFetchAllocs bounds the allocation IDs of one NodeFetchAllocsHTTPRequest;
// a client with more changes fetches them in several requests.
const MaxFetchAllocs = 1000

// NodeClientAllocsHTTPResponse answers GET /v1/node/{id}/client-allocs:
// every allocation on the node, terminal or not, by ID, with its
// AllocModifyIndex (the index of its last server-side change: placement,
// stop, migration; a client's own status reports do not move it).
type NodeClientAllocsHTTPResponse struct {
	Allocs map[string]uint64
}

// NodeFetchAllocsHTTPRequest is the body of POST
// /v1/node/{id}/client-allocs/fetch: the allocations to read (at most
// MaxFetchAllocs, each on the node).
type NodeFetchAllocsHTTPRequest struct {
	AllocIDs []string
}

// NodeFetchAllocsHTTPResponse answers a fetch: the allocations found, in
// the order asked (an ID no longer stored is left out), each without its
// Job, and each job version they run once in Jobs.
type NodeFetchAllocsHTTPResponse struct {
	Allocs []*NodeFetchedAlloc
	// Jobs holds each distinct job version of Allocs once.
	Jobs []*Job
}

// NodeFetchedAlloc is one fetched allocation: Alloc.Job is nil, and the
// job is the element of the response's Jobs with ID Alloc.JobID and
// ModifyIndex JobIndex (JobIndex 0: the allocation has no job).
type NodeFetchedAlloc struct {
	Alloc    *Allocation
	JobIndex uint64
}

// Validate checks the request's bounds: 1 to MaxFetchAllocs IDs, none
// empty. Errors wrap ErrInvalid and name the field.
func (r *NodeFetchAllocsHTTPRequest) Validate() error {
	if len(r.AllocIDs) == 0 {
		return fmt.Errorf("%w: AllocIDs: must name at least one allocation", ErrInvalid)
	}
	if len(r.AllocIDs) > MaxFetchAllocs {
		return fmt.Errorf("%w: AllocIDs: %d IDs, at most %d in one request", ErrInvalid, len(r.AllocIDs), MaxFetchAllocs)
	}
	for i, id := range r.AllocIDs {
		if id == "" || len(id) > 128 {
			return fmt.Errorf("%w: AllocIDs[%d]: must be 1 to 128 characters", ErrInvalid, i)
		}
	}
	return nil
}

// AttachJobs returns the response's allocations with their Job set from
// Jobs. An allocation whose job version is missing from Jobs is an error
// wrapping ErrDecode naming it.
func (r *NodeFetchAllocsHTTPResponse) AttachJobs() ([]*Allocation, error) {
	type key struct {
		id  string
		idx uint64
	}
	jobs := make(map[key]*Job, len(r.Jobs))
	for _, j := range r.Jobs {
		if j != nil {
			jobs[key{j.ID, j.ModifyIndex}] = j
		}
	}
	out := make([]*Allocation, 0, len(r.Allocs))
	for i, fa := range r.Allocs {
		if fa == nil || fa.Alloc == nil {
			return nil, fmt.Errorf("%w: Allocs[%d]: no allocation", ErrDecode, i)
		}
		a := fa.Alloc
		if fa.JobIndex != 0 {
			j := jobs[key{a.JobID, fa.JobIndex}]
			if j == nil {
				return nil, fmt.Errorf("%w: Allocs[%d] (%s): job %q at index %d not in Jobs", ErrDecode, i, a.ID, a.JobID, fa.JobIndex)
			}
			a.Job = j
		}
		out = append(out, a)
	}
	return out, nil
}
