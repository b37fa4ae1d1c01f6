package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// maxPlansInFlight bounds the verified plans whose Raft entries the plan
// applier has handed to Raft and not yet seen applied.
const maxPlansInFlight = 32

// planApplier runs on the leader: it takes plans from the plan queue one at
// a time, verifies each against the newest state and commits what fits in
// one Raft entry (Nomad's nomad/plan_apply.go). Like Nomad's, it pipelines:
// it does not wait for a plan's entry to be applied before verifying the
// next one, which it checks against the newest state plus the allocations
// of every plan still in flight (planOverlay), so a GPU, CPU or memory a
// committed-but-unapplied plan holds is never given again. Plans handed to
// Raft together are written in one disk write, so the plans of many
// workers commit in the time of one.
func (s *Server) planApplier(ctx context.Context) {
	log := s.logger.Named("plan_apply")
	var inflight []*planInFlight
	for {
		p, err := s.planQueue.Dequeue(ctx)
		if err != nil {
			return
		}
		inflight = reapPlans(inflight)
		for len(inflight) >= maxPlansInFlight {
			<-inflight[0].done
			inflight = reapPlans(inflight)
		}
		f, result, err := s.startPlan(p, inflight, log)
		switch {
		case err != nil:
			log.Error("plan apply failed", "eval_id", p.plan.EvalID, "error", err)
			p.respond(nil, err)
		case f != nil:
			inflight = append(inflight, f)
		default:
			if result.RefreshIndex != 0 {
				// Nothing committed, part refused: the refreshed snapshot
				// the worker waits for must hold the plans in flight.
				for _, g := range inflight {
					<-g.done
					if g.err == nil && g.index > result.RefreshIndex {
						result.RefreshIndex = g.index
					}
				}
				inflight = reapPlans(inflight)
			}
			p.respond(result, nil)
		}
	}
}

// planInFlight is a verified plan whose Raft entry is handed to Raft; done
// is closed once it is applied (index set) or failed (err set).
type planInFlight struct {
	result *structs.PlanResult
	// placed holds shallow copies of the allocations the entry commits
	// (placements and stops), by node, for planOverlay: the submitter owns
	// the plan's own allocations again once it has its answer.
	placed map[string][]*structs.Allocation
	done   chan struct{}
	index  uint64
	err    error
}

// reapPlans drops the plans whose entries are applied or failed: the state
// snapshot taken next holds what they committed.
func reapPlans(inflight []*planInFlight) []*planInFlight {
	keep := inflight[:0]
	for _, f := range inflight {
		select {
		case <-f.done:
		default:
			keep = append(keep, f)
		}
	}
	for i := len(keep); i < len(inflight); i++ {
		inflight[i] = nil
	}
	return keep
}

// planOverlay returns, by node, the allocations (placed and stopped; a
// stopped one holds its resources until its client reports it terminal)
// of the plans in flight, which the state may not hold yet.
func planOverlay(inflight []*planInFlight) map[string][]*structs.Allocation {
	if len(inflight) == 0 {
		return nil
	}
	out := map[string][]*structs.Allocation{}
	for _, f := range inflight {
		for node, allocs := range f.placed {
			out[node] = append(out[node], allocs...)
		}
	}
	return out
}

// startPlan verifies one plan against the newest state and the plans in
// flight and hands what fits to Raft. It returns the plan in flight, whose
// submitter is answered once its entry is applied, or, when nothing is to
// be committed, the result to answer at once. It refuses a plan whose
// evaluation is no longer outstanding under the submitting worker's token
// (the evaluation was nacked and may be handled by another worker).
func (s *Server) startPlan(p *pendingPlan, inflight []*planInFlight, log planLogger) (*planInFlight, *structs.PlanResult, error) {
	plan := p.plan
	if tok, ok := s.broker.Outstanding(plan.EvalID); !ok || tok != p.evalToken {
		return nil, nil, fmt.Errorf("plan for eval %s: %w", plan.EvalID, ErrNotOutstanding)
	}
	snap, err := s.fsm.State().Snapshot()
	if err != nil {
		return nil, nil, fmt.Errorf("plan apply: snapshot: %w", err)
	}
	result, err := evaluatePlanOverlay(snap, plan, planOverlay(inflight), log)
	if err != nil {
		return nil, nil, err
	}
	if len(result.NodeUpdate) == 0 && len(result.NodeAllocation) == 0 && plan.Deployment == nil && len(plan.DeploymentUpdates) == 0 {
		return nil, result, nil
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
	f := &planInFlight{result: result, placed: map[string][]*structs.Allocation{}, done: make(chan struct{})}
	for _, node := range sortedKeys(result.NodeUpdate) {
		for _, a := range result.NodeUpdate[node] {
			a.ModifyTime = now
			req.AllocsStopped = append(req.AllocsStopped, structs.NormalizedStop(a))
			c := *a
			f.placed[node] = append(f.placed[node], &c)
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
			c := *a
			f.placed[node] = append(f.placed[node], &c)
		}
	}
	wait, err := s.raftApplyAsync(structs.ApplyPlanResultsRequestType, req)
	if err != nil {
		return nil, nil, fmt.Errorf("plan apply: %w", err)
	}
	go func() {
		defer close(f.done)
		_, index, err := wait()
		if err != nil {
			f.err = fmt.Errorf("plan apply: %w", err)
			s.logger.Named("plan_apply").Error("plan apply failed", "eval_id", plan.EvalID, "error", f.err)
			p.respond(nil, f.err)
			return
		}
		f.index = index
		result.AllocIndex = index
		if result.RefreshIndex != 0 && index > result.RefreshIndex {
			// The refreshed snapshot must include what was just
			// committed (and the plans before it), so the scheduler does
			// not place it twice.
			result.RefreshIndex = index
		}
		p.respond(result, nil)
	}()
	return f, nil, nil
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
	return evaluatePlanOverlay(snap, plan, nil, log)
}

// evaluatePlanOverlay is evaluatePlan with, by node, allocations to count
// beside the state's: those of plans committed but maybe not yet applied.
// An allocation in both counts once, in its overlay version.
func evaluatePlanOverlay(snap *state.StateSnapshot, plan *structs.Plan, overlay map[string][]*structs.Allocation, log planLogger) (*structs.PlanResult, error) {
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
		ok, reason, err := evaluateNodePlanOverlay(snap, plan, nodeID, overlay[nodeID])
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
	return evaluateNodePlanOverlay(snap, plan, nodeID, nil)
}

// evaluateNodePlanOverlay is evaluateNodePlan counting inflight (the
// node's allocations of plans committed but maybe not yet applied) beside
// the state's; an allocation in both counts once, in its inflight version.
func evaluateNodePlanOverlay(snap *state.StateSnapshot, plan *structs.Plan, nodeID string, inflight []*structs.Allocation) (ok bool, reason string, err error) {
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
	for _, a := range inflight {
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
