package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// barrierTimeout bounds the Raft barrier a new leader issues before it reads
// the state store.
const barrierTimeout = time.Minute

// leaderState holds what runs only while this server is leader.
type leaderState struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// monitorLeadership watches Raft's leadership notifications and establishes
// or revokes leadership until ctx ends.
func (s *Server) monitorLeadership(ctx context.Context) {
	var ls *leaderState
	for {
		select {
		case <-ctx.Done():
			if ls != nil {
				s.stopLeader(ls)
			}
			return
		case isLeader := <-s.leaderCh:
			switch {
			case isLeader && ls == nil:
				ls = s.startLeader(ctx)
			case !isLeader && ls != nil:
				s.stopLeader(ls)
				ls = nil
			}
		}
	}
}

// startLeader begins establishing leadership in the background, so the
// leader loop keeps watching for its loss meanwhile.
func (s *Server) startLeader(parent context.Context) *leaderState {
	ctx, cancel := context.WithCancel(parent)
	ls := &leaderState{cancel: cancel}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		if err := s.establishLeadership(ctx, ls); err != nil {
			if ctx.Err() == nil {
				s.logger.Error("establish leadership failed; stepping down", "error", err)
				if err := s.raft.LeadershipTransfer().Error(); err != nil {
					s.logger.Warn("leadership transfer", "error", err)
				}
			}
		}
	}()
	return ls
}

func (s *Server) stopLeader(ls *leaderState) {
	ls.cancel()
	ls.wg.Wait()
	s.revokeLeadership()
	s.logger.Info("cluster leadership lost")
}

// establishLeadership runs once this server wins an election: a Raft
// barrier (so the state store holds every committed entry), then it
// enables the eval broker, blocked evaluations and plan queue, starts the
// plan applier and reapers, re-enqueues pending and blocked evaluations
// from the state store, starts the garbage collector (core_gc.go), starts
// heartbeat timers for every known node (the generous failover TTL),
// finishes marking lost the allocations of down nodes, and, with gossip,
// starts reconciling servers with Raft (autopilot.go).
func (s *Server) establishLeadership(ctx context.Context, ls *leaderState) error {
	s.logger.Info("cluster leadership acquired")
	if err := s.raft.Barrier(barrierTimeout).Error(); err != nil {
		return fmt.Errorf("raft barrier: %w", err)
	}
	s.broker.SetEnabled(true)
	s.blocked.SetEnabled(true)
	s.planQueue.SetEnabled(true)
	for _, fn := range []func(context.Context){s.planApplier, s.reapFailedEvals, s.reapDuplicateBlockedEvals, s.drainer, s.gcLoop,
		// Periodic and parameterized jobs (periodic.go, children_release.go).
		s.periodicLoop, s.childrenReleaseLoop,
		// Job versions and deployments.
		s.deploymentWatchLoop,
		// Provisioning (provision_loop.go).
		s.provisionLoop} {
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			fn(ctx)
		}()
	}
	if err := s.restoreEvals(); err != nil {
		return err
	}
	if err := s.initializeHeartbeatTimers(); err != nil {
		return err
	}
	if err := s.sweepDownNodes(); err != nil {
		return fmt.Errorf("sweep down nodes: %w", err)
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		s.sweepLoop(ctx)
	}()
	if s.members != nil {
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			s.reconcileLoop(ctx)
		}()
	}
	s.established.Store(true)
	s.markCaughtUp()
	return nil
}

// revokeLeadership disables and flushes everything the leader ran.
func (s *Server) revokeLeadership() {
	s.established.Store(false)
	s.planQueue.SetEnabled(false)
	s.blocked.SetEnabled(false)
	s.broker.SetEnabled(false)
	s.heartbeats.clear()
}

// restoreEvals puts the state store's pending evaluations into the broker
// and its blocked ones into the blocked tracker, then unblocks them once:
// capacity may have changed while no leader was tracking them.
func (s *Server) restoreEvals() error {
	store := s.fsm.State()
	evals, err := store.Evals(nil)
	if err != nil {
		return fmt.Errorf("restore evals: %w", err)
	}
	var pending, blocked int
	for _, e := range evals {
		switch e.Status {
		case structs.EvalStatusPending:
			s.broker.Enqueue(e)
			pending++
		case structs.EvalStatusBlocked:
			s.blocked.Block(e)
			blocked++
		}
	}
	if blocked > 0 {
		idx, err := store.LatestIndex()
		if err != nil {
			return fmt.Errorf("restore evals: %w", err)
		}
		s.blocked.Unblock(idx)
	}
	s.logger.Debug("restored evaluations", "pending", pending, "blocked", blocked)
	return nil
}

// reapFailedEvals marks evaluations that exceeded the broker's delivery
// limit as failed through Raft.
func (s *Server) reapFailedEvals(ctx context.Context) {
	for {
		eval, err := s.broker.DequeueFailed(ctx)
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		eval.Status = structs.EvalStatusFailed
		eval.StatusDescription = fmt.Sprintf("evaluation reached delivery limit (%d)", s.broker.cfg.DeliveryLimit)
		eval.ModifyTime = now
		followUp := newFollowUpEval(eval, now)
		eval.NextEval = followUp.ID
		_, index, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{eval, followUp}})
		if err != nil {
			s.logger.Error("mark evaluation failed", "eval_id", eval.ID, "error", err)
			continue
		}
		s.logger.Warn("evaluation failed after repeated nacks; follow-up scheduled", "eval_id", eval.ID, "job_id", eval.JobID, "follow_up", followUp.ID)
		s.enqueueFollowUp(followUp, index)
	}
}

// reapDuplicateBlockedEvals cancels blocked evaluations superseded by a
// newer blocked evaluation of the same job.
func (s *Server) reapDuplicateBlockedEvals(ctx context.Context) {
	for {
		dups, err := s.blocked.Duplicates(ctx)
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		for _, e := range dups {
			e.Status = structs.EvalStatusCanceled
			e.StatusDescription = "superseded by a newer blocked evaluation"
			e.ModifyTime = now
		}
		if _, _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: dups}); err != nil {
			s.logger.Error("cancel duplicate blocked evaluations", "count", len(dups), "error", err)
		}
	}
}

// newFollowUpEval returns the pending evaluation that retries a failed one
// (Nomad's Evaluation.CreateFailedFollowUpEval).
func newFollowUpEval(failed *structs.Evaluation, now int64) *structs.Evaluation {
	return &structs.Evaluation{
		ID:             structs.GenerateUUID(),
		Namespace:      failed.Namespace,
		Priority:       failed.Priority,
		Type:           failed.Type,
		TriggeredBy:    structs.EvalTriggerRetryFailed,
		JobID:          failed.JobID,
		JobModifyIndex: failed.JobModifyIndex,
		Status:         structs.EvalStatusPending,
		PreviousEval:   failed.ID,
		CreateTime:     now,
		ModifyTime:     now,
	}
}

// enqueueFollowUp hands a committed follow-up evaluation to the broker
// after FailedFollowUpDelay plus a random jitter of up to the same again,
// so a retry storm spreads out. If leadership changes meanwhile, the next
// leader finds it pending in the state store.
func (s *Server) enqueueFollowUp(eval *structs.Evaluation, index uint64) {
	eval.CreateIndex, eval.ModifyIndex = index, index
	d := s.config.FailedFollowUpDelay
	d += time.Duration(rand.Int64N(int64(d) + 1))
	time.AfterFunc(d, func() {
		if s.shutdownCtx.Err() == nil {
			s.broker.Enqueue(eval)
		}
	})
}
