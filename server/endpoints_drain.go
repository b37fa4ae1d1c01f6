package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// NodeDrainRequest asks for a node's drain to start or stop.
type NodeDrainRequest struct {
	// NodeID is the node's ID or a unique prefix of it.
	NodeID string
	// Enable starts a drain; false stops one.
	Enable bool
	// Deadline is how long the drain may take: at the deadline every
	// allocation left on the node is stopped. Zero means no deadline
	// (batch allocations run to completion); negative means stop
	// everything at once.
	Deadline time.Duration
	// KeepIneligible keeps the node ineligible when a drain is stopped;
	// by default it becomes eligible again.
	KeepIneligible bool
}

// resolveNode returns the stored node (with its secret) for an ID or a
// unique ID prefix.
func (s *Server) resolveNode(ctx context.Context, id string) (*structs.Node, error) {
	stub, _, err := s.NodeGet(ctx, id, &structs.QueryOptions{})
	if err != nil {
		return nil, err
	}
	n, err := s.fsm.State().NodeByID(nil, stub.ID)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("node %q: %w", id, structs.ErrNotFound)
	}
	return n, nil
}

// NodeUpdateDrain starts or stops a node's drain. Starting one marks the
// node ineligible (no new placements) and records the drain strategy; the
// leader's drainer then moves the node's service allocations elsewhere,
// each one stopped only once its replacement runs, lets batch allocations
// run until the deadline, and stops whatever is left at the deadline. It
// returns the Raft index of the change. Errors wrap structs.ErrNotFound
// for an unknown node, structs.ErrInvalid for an ambiguous prefix, and
// structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) NodeUpdateDrain(ctx context.Context, req *NodeDrainRequest) (uint64, error) {
	if req == nil || strings.TrimSpace(req.NodeID) == "" {
		return 0, fmt.Errorf("node drain: %w: node ID is required", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.NodeUpdateDrain(fctx, req)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	n, err := s.resolveNode(ctx, req.NodeID)
	if err != nil {
		return 0, fmt.Errorf("node drain: %w", err)
	}
	n = n.Copy()
	now := time.Now().UnixNano()
	if req.Enable {
		ds := &structs.DrainStrategy{Deadline: int64(req.Deadline), StartedAt: now}
		switch {
		case req.Deadline > 0:
			ds.ForceDeadline = now + int64(req.Deadline)
		case req.Deadline < 0:
			ds.ForceDeadline = now
		}
		n.DrainStrategy = ds
		n.SchedulingEligibility = structs.NodeSchedulingIneligible
	} else {
		n.DrainStrategy = nil
		if !req.KeepIneligible {
			n.SchedulingEligibility = structs.NodeSchedulingEligible
		}
	}
	_, index, err := s.raftApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
	if err != nil {
		return 0, fmt.Errorf("node drain %s: %w", n.ID, err)
	}
	s.logger.Info("node drain updated", "node_id", n.ID, "enable", req.Enable, "deadline", req.Deadline)
	return index, nil
}

// NodeUpdateEligibility marks a node eligible or ineligible for new
// placements; running allocations are not touched. A draining node cannot
// be made eligible (stop the drain instead). Errors wrap
// structs.ErrInvalid for another value or a draining node,
// structs.ErrNotFound for an unknown node, and structs.ErrNotLeader or
// structs.ErrShutdown.
func (s *Server) NodeUpdateEligibility(ctx context.Context, nodeID, eligibility string) (uint64, error) {
	if eligibility != structs.NodeSchedulingEligible && eligibility != structs.NodeSchedulingIneligible {
		return 0, fmt.Errorf("node eligibility: %w: eligibility must be %q or %q, got %q", structs.ErrInvalid,
			structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible, eligibility)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.NodeUpdateEligibility(fctx, nodeID, eligibility)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	n, err := s.resolveNode(ctx, nodeID)
	if err != nil {
		return 0, fmt.Errorf("node eligibility: %w", err)
	}
	if n.DrainStrategy != nil && eligibility == structs.NodeSchedulingEligible {
		return 0, fmt.Errorf("node eligibility: %w: node %s is draining; stop the drain to make it eligible", structs.ErrInvalid, n.ID)
	}
	if n.SchedulingEligibility == eligibility {
		return n.ModifyIndex, nil
	}
	n = n.Copy()
	n.SchedulingEligibility = eligibility
	_, index, err := s.raftApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
	if err != nil {
		return 0, fmt.Errorf("node eligibility %s: %w", n.ID, err)
	}
	if eligibility == structs.NodeSchedulingEligible {
		// New capacity: blocked evaluations may place now.
		s.blocked.Unblock(index)
	}
	return index, nil
}

// AllocStop stops one allocation and creates an evaluation of its job, so
// the scheduler replaces it (a service allocation, or a batch one that had
// not finished). It returns the evaluation's ID and the Raft index. Errors
// wrap structs.ErrNotFound for an unknown allocation, structs.ErrInvalid
// for an ambiguous prefix, and structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) AllocStop(ctx context.Context, allocID string) (string, uint64, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.AllocStop(fctx, allocID)
	}
	if err := s.readyForWrites(); err != nil {
		return "", 0, err
	}
	a, _, err := s.AllocGet(ctx, allocID, &structs.QueryOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("alloc stop: %w", err)
	}
	eval := s.jobEval(a, structs.EvalTriggerAllocStop)
	stop := &structs.Allocation{ID: a.ID, DesiredStatus: structs.AllocDesiredStatusStop, DesiredDescription: "alloc stopped by user"}
	index, err := s.applyStops([]*structs.Allocation{stop}, []*structs.Evaluation{eval})
	if err != nil {
		return "", 0, fmt.Errorf("alloc stop %s: %w", a.ID, err)
	}
	return eval.ID, index, nil
}

// jobEval returns a pending evaluation of the allocation's job.
func (s *Server) jobEval(a *structs.Allocation, trigger string) *structs.Evaluation {
	now := time.Now().UnixNano()
	e := &structs.Evaluation{
		ID: structs.GenerateUUID(), Namespace: a.Namespace, JobID: a.JobID, TriggeredBy: trigger,
		NodeID: a.NodeID, Status: structs.EvalStatusPending, CreateTime: now, ModifyTime: now,
	}
	if a.Job != nil {
		e.Priority, e.Type, e.JobModifyIndex = a.Job.Priority, a.Job.Type, a.Job.JobModifyIndex
	}
	if job, err := s.fsm.State().JobByID(nil, a.JobID); err == nil && job != nil {
		e.Priority, e.Type, e.JobModifyIndex, e.Namespace = job.Priority, job.Type, job.JobModifyIndex, job.Namespace
	}
	return e
}

// applyStops commits allocation stop updates and updated allocations
// (placed copies of existing ones) with their evaluations in one Raft
// entry, then enqueues the evaluations. Stops and in-place updates only
// free or keep resources, so they need not pass the plan applier's fit
// check.
func (s *Server) applyStops(stops []*structs.Allocation, evals []*structs.Evaluation, updates ...*structs.Allocation) (uint64, error) {
	req := &structs.ApplyPlanResultsRequest{AllocsStopped: stops, AllocsPlaced: updates, Evals: evals, UpdatedAt: time.Now().UnixNano()}
	_, index, err := s.raftApply(structs.ApplyPlanResultsRequestType, req)
	if err != nil {
		return 0, err
	}
	for _, e := range evals {
		e.CreateIndex, e.ModifyIndex = index, index
		s.broker.Enqueue(e)
	}
	return index, nil
}
