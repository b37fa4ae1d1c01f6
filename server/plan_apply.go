package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// planApplier runs on the leader: it takes plans from the plan queue one at
// a time, verifies each against the newest state and commits what fits in
// one Raft entry (Nomad's nomad/plan_apply.go, without its pipelining: the
// next plan is verified only once the previous one is applied, so it always
// sees the allocations committed before it).
func (s *Server) planApplier(ctx context.Context) {
	log := s.logger.Named("plan_apply")
	for {
		p, err := s.planQueue.Dequeue(ctx)
		if err != nil {
			return
		}
		result, err := s.applyPlan(p)
		if err != nil {
			log.Error("plan apply failed", "eval_id", p.plan.EvalID, "error", err)
		}
		p.respond(result, err)
	}
}

// applyPlan verifies and commits one plan. It refuses a plan whose
// evaluation is no longer outstanding under the submitting worker's token
// (the evaluation was nacked and may be handled by another worker).
func (s *Server) applyPlan(p *pendingPlan) (*structs.PlanResult, error) {
	plan := p.plan
	if tok, ok := s.broker.Outstanding(plan.EvalID); !ok || tok != p.evalToken {
		return nil, fmt.Errorf("plan for eval %s: %w", plan.EvalID, ErrNotOutstanding)
	}
	snap, err := s.fsm.State().Snapshot()
	if err != nil {
		return nil, fmt.Errorf("plan apply: snapshot: %w", err)
	}
	result, err := evaluatePlan(snap, plan, s.logger.Named("plan_apply"))
	if err != nil {
		return nil, err
	}
	if len(result.NodeUpdate) == 0 && len(result.NodeAllocation) == 0 && plan.Deployment == nil && len(plan.DeploymentUpdates) == 0 {
		return result, nil
	}
	now := time.Now().UnixNano()
	// The Raft entry is normalised as Nomad's plan applier does: a stop
	// carries only what the state store takes from it, and the job travels
	// once in req.Job instead of inside every placement. A plan of
	// thousands of allocations of a large job would otherwise make an entry
	// of gigabytes.
	req := &structs.ApplyPlanResultsRequest{EvalID: plan.EvalID, UpdatedAt: now, Job: plan.Job,
		DeploymentUpdates: plan.DeploymentUpdates}
	if plan.Deployment != nil {
		// Times come from the leader's clock here, not the scheduler.
		d := plan.Deployment.Copy()
		if d.CreateTime == 0 {
			d.CreateTime = now
		}
		d.ModifyTime = now
		req.Deployment = d
	}
	for _, node := range sortedKeys(result.NodeUpdate) {
		for _, a := range result.NodeUpdate[node] {
			a.ModifyTime = now
			req.AllocsStopped = append(req.AllocsStopped, structs.NormalizedStop(a))
		}
	}
	for _, node := range sortedKeys(result.NodeAllocation) {
		for _, a := range result.NodeAllocation[node] {
			if a.CreateTime == 0 {
				a.CreateTime = now
			}
			a.ModifyTime = now
			placed := a
			if plan.Job != nil && a.Job == plan.Job {
				slim := *a
				slim.Job = nil
				placed = &slim
			}
			req.AllocsPlaced = append(req.AllocsPlaced, placed)
		}
	}
	_, index, err := s.raftApply(structs.ApplyPlanResultsRequestType, req)
	if err != nil {
		return nil, fmt.Errorf("plan apply: %w", err)
	}
	result.AllocIndex = index
	if result.RefreshIndex != 0 && index > result.RefreshIndex {
		// The refreshed snapshot must include what was just committed, so
		// the scheduler does not place it twice.
		result.RefreshIndex = index
	}
	return result, nil
}

// planLogger is the part of hclog.Logger evaluatePlan uses.
type planLogger interface {
	Debug(msg string, args ...interface{})
}

// evaluatePlan checks every node of the plan against snap and returns the
// parts that fit. Refused nodes are listed in RejectedNodes and
// RefreshIndex is set to the snapshot's index. A gang is committed whole or
// not at all (refuseGangs), and an endpoint's members are not stopped while
// their refused replacements wait (refuseEndpointMoves).
func evaluatePlan(snap *state.StateSnapshot, plan *structs.Plan, log planLogger) (*structs.PlanResult, error) {
	result := &structs.PlanResult{
		NodeUpdate:     map[string][]*structs.Allocation{},
		NodeAllocation: map[string][]*structs.Allocation{},
	}
	nodes := map[string]struct{}{}
	for n := range plan.NodeUpdate {
		nodes[n] = struct{}{}
	}
	for n := range plan.NodeAllocation {
		nodes[n] = struct{}{}
	}
	ids := make([]string, 0, len(nodes))
	for n := range nodes {
		ids = append(ids, n)
	}
	sort.Strings(ids)
	for _, nodeID := range ids {
		ok, reason, err := evaluateNodePlan(snap, plan, nodeID)
		if err != nil {
			return nil, fmt.Errorf("plan apply: node %s: %w", nodeID, err)
		}
		if !ok {
			log.Debug("plan refused for node", "eval_id", plan.EvalID, "node_id", nodeID, "reason", reason)
			result.RejectedNodes = append(result.RejectedNodes, nodeID)
			continue
		}
		if u := plan.NodeUpdate[nodeID]; len(u) > 0 {
			result.NodeUpdate[nodeID] = u
		}
		if a := plan.NodeAllocation[nodeID]; len(a) > 0 {
			result.NodeAllocation[nodeID] = a
		}
	}
	if gangs := refuseGangs(plan, result); len(gangs) > 0 {
		log.Debug("gang placement refused with its other nodes", "eval_id", plan.EvalID, "nodes", len(gangs))
	}
	if held := refuseEndpointMoves(plan, result); held > 0 {
		log.Debug("endpoint member stops held back with their refused replacements", "eval_id", plan.EvalID, "stops", held)
	}
	if len(result.RejectedNodes) > 0 {
		idx, err := snap.LatestIndex()
		if err != nil {
			return nil, fmt.Errorf("plan apply: %w", err)
		}
		if idx == 0 {
			idx = 1
		}
		result.RefreshIndex = idx
	}
	return result, nil
}

// evaluateNodePlan reports whether the plan's part for one node fits the
// node in snap. A part that only stops allocations always fits. Otherwise
// the node must exist and be Ready, and the allocations that hold resources
// on it afterwards (existing ones, replaced by the plan's version when the
// plan stops or updates them, plus the plan's placements; a stopped
// allocation holds its resources until its client reports it terminal) must
// together fit the node's CPU (MHz) and memory (MiB) minus its reserved
// resources, and use every device instance at most once. Each device
// instance a placement names must exist on the node in a healthy instance of
// the named device group. reason explains a refusal; err is returned only
// when the state could not be read.
func evaluateNodePlan(snap *state.StateSnapshot, plan *structs.Plan, nodeID string) (ok bool, reason string, err error) {
	placements := plan.NodeAllocation[nodeID]
	if len(placements) == 0 {
		return true, "", nil
	}
	node, err := snap.NodeByID(nil, nodeID)
	if err != nil {
		return false, "", err
	}
	if node == nil {
		return false, "node does not exist", nil
	}
	if !node.Ready() {
		return false, node.NotReadyReason(), nil
	}
	existing, err := snap.AllocsByNode(nil, nodeID)
	if err != nil {
		return false, "", err
	}
	byID := make(map[string]*structs.Allocation, len(existing)+len(placements))
	for _, a := range existing {
		byID[a.ID] = a
	}
	for _, a := range plan.NodeUpdate[nodeID] {
		byID[a.ID] = a
	}
	for _, a := range placements {
		byID[a.ID] = a
	}

	all := make([]*structs.Allocation, 0, len(byID))
	for _, id := range sortedKeys(byID) {
		all = append(all, byID[id])
	}
	ok, reason = structs.AllocsFit(node, all)
	return ok, reason, nil
}

// refuseGangs makes gang placement all-or-nothing at the applier: when any
// node of the plan was refused and the plan places gang members
// (Allocation.Gang set), every node holding a gang member is refused too,
// so a gang is never partly committed. It returns the nodes it refused.
func refuseGangs(plan *structs.Plan, result *structs.PlanResult) []string {
	if len(result.RejectedNodes) == 0 {
		return nil
	}
	var refused []string
	for _, nodeID := range sortedKeys(result.NodeAllocation) {
		for _, a := range result.NodeAllocation[nodeID] {
			if a.Gang != nil && a.CreateIndex == 0 {
				delete(result.NodeAllocation, nodeID)
				delete(result.NodeUpdate, nodeID)
				refused = append(refused, nodeID)
				break
			}
		}
	}
	result.RejectedNodes = append(result.RejectedNodes, refused...)
	sort.Strings(result.RejectedNodes)
	return refused
}

// sortedKeys returns m's keys in order, so results and logs are
// deterministic.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
