package structs

// Plan is the scheduler's proposed change for one evaluation: allocations to
// stop (NodeUpdate) and to place (NodeAllocation), keyed by node ID. Only the
// leader's plan applier commits it, after checking it against the newest
// state.
type Plan struct {
	EvalID   string
	Priority int
	Job      *Job
	// NodeUpdate holds allocations to stop, with DesiredStatus and
	// DesiredDescription already set.
	NodeUpdate map[string][]*Allocation
	// NodeAllocation holds new or updated allocations per node.
	NodeAllocation map[string][]*Allocation
	// SnapshotIndex is the state index the scheduler planned against.
	SnapshotIndex uint64
	// Deployment, when set, is created (or, same ID, updated) with the
	// plan; DeploymentUpdates change other deployments' status (a newer
	// version cancels the old one's).
	Deployment        *Deployment
	DeploymentUpdates []*DeploymentStatusUpdate
}

// AppendStoppedAlloc records that alloc should stop, with a reason.
func (p *Plan) AppendStoppedAlloc(alloc *Allocation, desc string) {
	a := alloc.Copy()
	a.DesiredStatus = AllocDesiredStatusStop
	a.DesiredDescription = desc
	if p.NodeUpdate == nil {
		p.NodeUpdate = map[string][]*Allocation{}
	}
	p.NodeUpdate[a.NodeID] = append(p.NodeUpdate[a.NodeID], a)
}

// AppendAlloc records a placement.
func (p *Plan) AppendAlloc(alloc *Allocation) {
	if p.NodeAllocation == nil {
		p.NodeAllocation = map[string][]*Allocation{}
	}
	p.NodeAllocation[alloc.NodeID] = append(p.NodeAllocation[alloc.NodeID], alloc)
}

// NormalizedStop returns the part of a stop update that travels in a Raft
// entry: the fields the state store takes from a stop (DesiredStatus,
// DesiredDescription, PreemptedByJob) and those that locate the
// allocation. Keep it in step with state.UpsertPlanResults.
func NormalizedStop(a *Allocation) *Allocation {
	return &Allocation{
		ID: a.ID, NodeID: a.NodeID, JobID: a.JobID, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		PreemptedByJob: a.PreemptedByJob, ModifyTime: a.ModifyTime,
	}
}

// IsNoOp reports whether the plan changes nothing.
func (p *Plan) IsNoOp() bool {
	return len(p.NodeUpdate) == 0 && len(p.NodeAllocation) == 0 && p.Deployment == nil && len(p.DeploymentUpdates) == 0
}

// PlanResult is what the plan applier committed. A node whose part of the
// plan was refused (it would over-commit the node) is missing from both
// maps; RefreshIndex is then non-zero and the scheduler must refresh its
// state to at least that index and try again for what was refused.
type PlanResult struct {
	NodeUpdate     map[string][]*Allocation
	NodeAllocation map[string][]*Allocation
	// RejectedNodes lists nodes whose part of the plan was refused.
	RejectedNodes []string
	RefreshIndex  uint64
	// AllocIndex is the Raft index at which the plan was applied.
	AllocIndex uint64
}

// FullCommit reports whether every part of plan was committed, and the
// numbers of expected and actual placements.
func (r *PlanResult) FullCommit(plan *Plan) (bool, int, int) {
	expected, actual := 0, 0
	for node, allocs := range plan.NodeAllocation {
		expected += len(allocs)
		actual += len(r.NodeAllocation[node])
	}
	return expected == actual && len(r.RejectedNodes) == 0, expected, actual
}
