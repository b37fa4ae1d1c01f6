// Package scheduler turns an evaluation into a plan. It is pure: it sees the
// cluster only through State (a consistent snapshot) and submits its result
// through Planner. It does no I/O and reads no clock; apart from new
// allocation and evaluation IDs (structs.GenerateUUID) the same snapshot and
// evaluation always give the same plan. Times are set by the server's worker.
// It imports only the standard library and structs.
//
// New returns the one generic scheduler for batch and service jobs. Blocked
// evaluation rule (the server's blocked-evaluation tracker must match it):
// when task groups cannot be placed in full, an evaluation that is itself a
// blocked evaluation being reprocessed (Status "blocked" or TriggeredBy
// "queued-allocs" on entry) is updated with Status "blocked" again and no
// evaluation is created; any other evaluation creates exactly one new
// evaluation with Status "blocked", TriggeredBy "queued-allocs" and
// PreviousEval set to its ID (Planner.CreateEval), and is itself updated
// with Status "complete" and BlockedEval set. An evaluation whose plan
// keeps being refused ends "failed" with StatusDescription "maximum
// attempts reached". See genericScheduler.Process.
package scheduler

import "github.com/gpulayer/gpulayer/structs"

// State is the read-only snapshot the scheduler plans against. The server's
// state store snapshot satisfies it.
type State interface {
	// Nodes returns every node, in any status; the scheduler filters.
	Nodes() ([]*structs.Node, error)
	// NodeByID returns the node or nil when it does not exist.
	NodeByID(id string) (*structs.Node, error)
	// JobByID returns the job or nil when it does not exist.
	JobByID(id string) (*structs.Job, error)
	// AllocsByJob returns every allocation of the job, terminal or not.
	AllocsByJob(jobID string) ([]*structs.Allocation, error)
	// AllocsByNode returns every allocation on the node, terminal or not.
	AllocsByNode(nodeID string) ([]*structs.Allocation, error)
	// LatestIndex is the Raft index the snapshot reflects.
	LatestIndex() (uint64, error)
	// LatestDeploymentByJobID returns the job's newest deployment, or nil.
	LatestDeploymentByJobID(jobID string) (*structs.Deployment, error)
	// Endpoint aliases: EndpointAliasesByEndpoint returns the aliases of
	// namespace ns promoted onto endpoint, sorted by name (none: empty).
	EndpointAliasesByEndpoint(ns, endpoint string) ([]*structs.EndpointAlias, error)
}

// Planner commits plans and evaluation updates on the scheduler's behalf.
// The server's worker implements it.
type Planner interface {
	// SubmitPlan hands the plan to the leader's plan applier and waits for
	// the result. When part of the plan was refused, the result's
	// RefreshIndex is non-zero and newState is a snapshot at least that
	// fresh, to plan again against; otherwise newState is nil.
	SubmitPlan(plan *structs.Plan) (result *structs.PlanResult, newState State, err error)
	// UpdateEval records the evaluation's final status.
	UpdateEval(eval *structs.Evaluation) error
	// CreateEval records a new evaluation, such as a blocked evaluation for
	// groups that did not fit.
	CreateEval(eval *structs.Evaluation) error
}

// Scheduler processes one evaluation.
type Scheduler interface {
	// Process computes and submits the plan for eval. It returns an error
	// only when the evaluation could not be processed at all (the worker
	// then nacks it for a retry); placement failures are recorded on the
	// evaluation instead.
	Process(eval *structs.Evaluation) error
}
