package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// lostSweepInterval is how often the leader re-runs sweepDownNodes, in case
// marking a down node's allocations lost failed (a Raft error) while it
// kept leadership.
const lostSweepInterval = 30 * time.Second

// Descriptions written on the allocations of a node that went down.
const (
	descAllocLostDesired = "alloc is lost since its node is down"
	descAllocLostClient  = "alloc is lost since its node is down"
)

// markNodeAllocsLost handles the allocations of a node that is down
// (Nomad's node-down path, done here by the server rather than by the
// scheduler):
//
//  1. one Raft entry (ApplyPlanResultsRequest) tells every allocation on
//     the node that should still run to stop (DesiredStatus stop) and
//     creates one node-update evaluation per affected job;
//  2. a second entry (AllocClientUpdateRequest) marks every allocation on
//     the node that is not client-terminal `lost`.
//
// The scheduler then places replacements elsewhere: it ignores allocations
// told to stop, so each index of a service or batch group gets a new
// allocation. When the node comes back its client sees DesiredStatus stop
// and stops the old allocations, so a count = 1 job does not keep two
// copies. Stop comes before lost so that a leader lost between the two
// entries leaves allocations a sweep finds again (sweepDownNodes: not yet
// client-terminal on a down node). It runs on the leader only and returns
// the Raft errors.
func (s *Server) markNodeAllocsLost(nodeID string) error {
	store := s.fsm.State()
	allocs, err := store.AllocsByNode(nil, nodeID)
	if err != nil {
		return fmt.Errorf("node %s allocations: %w", nodeID, err)
	}
	now := time.Now().UnixNano()
	var stops, lost []*structs.Allocation
	jobs := map[string]*structs.Allocation{}
	for _, a := range allocs {
		if a.ClientTerminalStatus() {
			continue
		}
		lost = append(lost, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusLost, ClientDescription: descAllocLostClient, TaskStates: a.Copy().TaskStates})
		if a.DesiredStatus == structs.AllocDesiredStatusRun || a.DesiredStatus == "" {
			stops = append(stops, &structs.Allocation{ID: a.ID, DesiredStatus: structs.AllocDesiredStatusStop, DesiredDescription: descAllocLostDesired})
			jobs[a.JobID] = a
		}
	}
	if len(lost) == 0 {
		return nil
	}
	var evals []*structs.Evaluation
	for _, a := range jobs {
		job, err := store.JobByID(nil, a.JobID)
		if err != nil {
			return fmt.Errorf("node %s: job %s: %w", nodeID, a.JobID, err)
		}
		e := &structs.Evaluation{
			ID:          structs.GenerateUUID(),
			Namespace:   a.Namespace,
			TriggeredBy: structs.EvalTriggerNodeUpdate,
			JobID:       a.JobID,
			NodeID:      nodeID,
			Status:      structs.EvalStatusPending,
			CreateTime:  now,
			ModifyTime:  now,
		}
		if job != nil {
			e.Priority, e.Type, e.JobModifyIndex = job.Priority, job.Type, job.JobModifyIndex
		} else if a.Job != nil {
			e.Priority, e.Type = a.Job.Priority, a.Job.Type
		}
		if e.Type == "" {
			e.Type = structs.JobTypeService
		}
		evals = append(evals, e)
	}
	sort.Slice(evals, func(i, j int) bool { return evals[i].JobID < evals[j].JobID })
	var index uint64
	if len(stops) > 0 {
		_, index, err = s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsStopped: stops, Evals: evals, UpdatedAt: now})
		if err != nil {
			return fmt.Errorf("node %s: stop allocations: %w", nodeID, err)
		}
	}
	if _, _, err := s.raftApply(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: lost, UpdatedAt: now}); err != nil {
		return fmt.Errorf("node %s: mark allocations lost: %w", nodeID, err)
	}
	for _, e := range evals {
		e.CreateIndex, e.ModifyIndex = index, index
		s.broker.Enqueue(e)
	}
	s.logger.Named("heartbeat").Warn("allocations on a down node marked lost", "node_id", nodeID, "lost", len(lost), "stopped", len(stops), "evals", len(evals))
	return nil
}

// sweepDownNodes runs markNodeAllocsLost for every down node that still
// has allocations that are not client-terminal: a previous leader may have
// marked the node down and lost leadership before it finished.
func (s *Server) sweepDownNodes() error {
	nodes, err := s.fsm.State().Nodes(nil)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Status != structs.NodeStatusDown {
			continue
		}
		if err := s.markNodeAllocsLost(n.ID); err != nil {
			return err
		}
	}
	return nil
}

// sweepLoop runs sweepDownNodes every lostSweepInterval until ctx ends (the
// leader runs it).
func (s *Server) sweepLoop(ctx context.Context) {
	t := time.NewTicker(lostSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.sweepDownNodes(); err != nil {
				s.logger.Named("heartbeat").Warn("sweep down nodes", "error", err)
			}
		}
	}
}
