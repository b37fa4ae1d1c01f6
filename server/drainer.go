package server

import (
	"context"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// drainInterval is how often the leader's drainer looks at draining nodes.
const drainInterval = 250 * time.Millisecond

// Allocation desired descriptions the drainer writes.
const (
	descDrainMigrated = "alloc migrated by node drain: its replacement runs"
	descDrainDeadline = "node drain deadline reached"
)

// drainer runs on the leader until ctx ends: every drainInterval it
// advances each draining node's drain. The rules, after Nomad's
// nomad/drainer (whose batching by migrate.max_parallel this version does
// not have):
//
//   - A running service allocation is marked DesiredTransition.Migrate and
//     its job evaluated: the scheduler places a replacement on another node
//     (the draining node is ineligible) and keeps the old one running.
//   - A migrating allocation is stopped once its replacement (the
//     allocation naming it PreviousAllocation) is running, so the service
//     is never down for the move.
//   - Batch allocations run on until the deadline.
//   - At the deadline every allocation left is stopped and its job
//     evaluated (a batch allocation that had not finished runs again
//     elsewhere), marked DesiredTransition.NoShutdownDelay: the deadline
//     forces the allocations off, so the client does not wait out a
//     shutdown_delay, and one it is waiting out (an allocation stopped
//     before the deadline, its tasks still running) is cut short.
//   - A node with nothing left running ends its drain: the strategy is
//     cleared and the node stays ineligible. Before a deadline, an
//     allocation told to stop whose tasks still run (waiting out a
//     shutdown_delay) is left running.
//
// While no node drains it sleeps on the nodes table (a drain starts with a
// write there) instead of listing every node each drainInterval: at 10,000
// nodes that listing was the idle leader's largest loop.
func (s *Server) drainer(ctx context.Context) {
	t := time.NewTicker(drainInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := s.fsm.State()
		ws := memdb.NewWatchSet()
		ws.Add(st.AbandonCh())
		nodes, err := st.Nodes(ws)
		if err != nil {
			s.logger.Warn("drainer: list nodes", "error", err)
			continue
		}
		draining := false
		for _, n := range nodes {
			if n.DrainStrategy == nil {
				continue
			}
			draining = true
			if err := s.drainNode(n); err != nil && ctx.Err() == nil {
				s.logger.Warn("drainer: drain step failed", "node_id", n.ID, "error", err)
			}
		}
		if !draining {
			// Wake at the next change of any node (or a restore that
			// replaces the store); a drain in progress is stepped every
			// drainInterval, its allocations and deadline being none of
			// the nodes table's changes.
			_ = ws.WatchCtx(ctx)
		}
	}
}

// drainNode advances one node's drain by one step.
func (s *Server) drainNode(n *structs.Node) error {
	st := s.fsm.State()
	allocs, err := st.AllocsByNode(nil, n.ID)
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	pastDeadline := n.DrainStrategy.ForceDeadline != 0 && now >= n.DrainStrategy.ForceDeadline
	var stops, marks []*structs.Allocation
	evals := map[string]*structs.Evaluation{}
	evalFor := func(a *structs.Allocation) {
		if evals[a.JobID] == nil {
			evals[a.JobID] = s.jobEval(a, structs.EvalTriggerNodeUpdate)
		}
	}
	remaining := 0
	for _, a := range allocs {
		if a.ClientTerminalStatus() {
			continue
		}
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			// Told to stop, its tasks still running: with a deadline to
			// come, the drain waits for it (a shutdown_delay must not
			// outlive the deadline); past the deadline it is marked to
			// stop at once, once.
			if n.DrainStrategy.ForceDeadline == 0 || a.DesiredTransition.NoShutdownDelay {
				continue
			}
			remaining++
			if pastDeadline {
				m := a.Copy()
				m.DesiredTransition.NoShutdownDelay = true
				marks = append(marks, m)
			}
			continue
		}
		remaining++
		isBatch := a.Job != nil && a.Job.Type == structs.JobTypeBatch
		switch {
		case pastDeadline:
			m := a.Copy()
			m.DesiredStatus, m.DesiredDescription = structs.AllocDesiredStatusStop, descDrainDeadline
			m.DesiredTransition.NoShutdownDelay = true
			marks = append(marks, m)
			evalFor(a)
		case isBatch:
			// Runs to completion or to the deadline.
		case !a.DesiredTransition.Migrate:
			m := a.Copy()
			m.DesiredTransition.Migrate = true
			marks = append(marks, m)
			evalFor(a)
		default:
			repl, err := s.replacementOf(a)
			if err != nil {
				return err
			}
			if repl != nil && repl.ClientStatus == structs.AllocClientStatusRunning {
				stops = append(stops, &structs.Allocation{ID: a.ID, DesiredStatus: structs.AllocDesiredStatusStop, DesiredDescription: descDrainMigrated})
			}
		}
	}
	if remaining == 0 {
		done := n.Copy()
		done.DrainStrategy = nil
		if _, _, err := s.raftApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: done}); err != nil {
			return err
		}
		s.logger.Info("node drain complete", "node_id", n.ID)
		return nil
	}
	if len(stops) == 0 && len(marks) == 0 {
		return nil
	}
	list := make([]*structs.Evaluation, 0, len(evals))
	for _, e := range evals {
		list = append(list, e)
	}
	if _, err := s.applyStops(stops, list, marks...); err != nil {
		return err
	}
	s.logger.Info("drain step", "node_id", n.ID, "updated", len(marks), "stopped", len(stops), "past_deadline", pastDeadline)
	return nil
}

// replacementOf returns the newest live allocation that replaces a, or nil.
func (s *Server) replacementOf(a *structs.Allocation) (*structs.Allocation, error) {
	allocs, err := s.fsm.State().AllocsByJob(nil, a.JobID)
	if err != nil {
		return nil, err
	}
	var best *structs.Allocation
	for _, c := range allocs {
		if c.PreviousAllocation == a.ID && c.DesiredStatus == structs.AllocDesiredStatusRun && (best == nil || c.CreateIndex > best.CreateIndex) {
			best = c
		}
	}
	return best, nil
}
