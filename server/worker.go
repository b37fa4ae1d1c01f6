package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/server/scheduler"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
)

// Worker timing.
const (
	// indexWaitLimit bounds how long a worker waits for the state store to
	// reach an evaluation's index (or a plan's refresh index) before it
	// nacks the evaluation.
	indexWaitLimit = 5 * time.Second
	// planWaitLimit bounds how long a worker waits for its plan's result.
	planWaitLimit = 2 * time.Minute
)

// schedulerTypes are the evaluation types workers dequeue.
var schedulerTypes = []string{structs.JobTypeService, structs.JobTypeBatch}

// worker dequeues evaluations, runs the scheduler on a state snapshot and
// acks or nacks them (Nomad's nomad/worker.go). It implements
// scheduler.Planner for the evaluation it is processing; one worker
// processes one evaluation at a time, so the fields below are only touched
// by its own goroutine.
type worker struct {
	srv    *Server
	logger hclog.Logger

	ctx       context.Context
	eval      *structs.Evaluation
	evalToken string
	// snapIndex is the index of the snapshot the scheduler planned against.
	snapIndex uint64
}

var _ scheduler.Planner = (*worker)(nil)

func newWorker(s *Server, id int) *worker {
	return &worker{srv: s, logger: s.logger.Named("worker").With("worker_id", id)}
}

// run processes evaluations until ctx ends.
func (w *worker) run(ctx context.Context) {
	w.ctx = ctx
	for {
		eval, token, err := w.srv.broker.Dequeue(ctx, schedulerTypes)
		if err != nil {
			return
		}
		w.eval, w.evalToken = eval, token
		start := time.Now()
		err = w.process(ctx, eval)
		w.srv.serverMetrics().observeEval(time.Since(start), err)
		switch {
		case err != nil:
			w.logger.Warn("evaluation failed; nacking", "eval_id", eval.ID, "job_id", eval.JobID, "error", err)
			if nerr := w.srv.broker.Nack(eval.ID, token); nerr != nil && ctx.Err() == nil {
				w.logger.Debug("nack", "eval_id", eval.ID, "error", nerr)
			}
		default:
			if aerr := w.srv.broker.Ack(eval.ID, token); aerr != nil && ctx.Err() == nil {
				w.logger.Warn("ack", "eval_id", eval.ID, "error", aerr)
			}
		}
		w.eval, w.evalToken, w.snapIndex = nil, "", 0
	}
}

// process schedules one evaluation against a snapshot at least as new as
// the evaluation.
func (w *worker) process(ctx context.Context, eval *structs.Evaluation) error {
	start := time.Now()
	snap, err := w.snapshotMinIndex(ctx, eval.ModifyIndex)
	if err != nil {
		return err
	}
	sched, err := scheduler.New(eval.Type, snap, w)
	if err != nil {
		return fmt.Errorf("new scheduler: %w", err)
	}
	if err := sched.Process(eval); err != nil {
		return err
	}
	w.logger.Debug("evaluation processed", "eval_id", eval.ID, "job_id", eval.JobID, "duration", time.Since(start))
	return nil
}

// snapshotMinIndex waits (up to indexWaitLimit) until the state store has
// applied index, then returns a snapshot adapter.
func (w *worker) snapshotMinIndex(ctx context.Context, index uint64) (*schedState, error) {
	ctx, cancel := context.WithTimeout(ctx, indexWaitLimit)
	defer cancel()
	store, err := waitForIndex(ctx, w.srv, index)
	if err != nil {
		return nil, err
	}
	snap, err := store.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("state snapshot: %w", err)
	}
	idx, err := snap.LatestIndex()
	if err != nil {
		return nil, fmt.Errorf("state snapshot: %w", err)
	}
	w.snapIndex = idx
	return &schedState{snap: snap}, nil
}

// waitForIndex polls the current state store until its latest index
// reaches index, returning that store, or ctx's error.
func waitForIndex(ctx context.Context, s *Server, index uint64) (*state.StateStore, error) {
	delay := time.Millisecond
	for {
		store := s.fsm.State()
		cur, err := store.LatestIndex()
		if err != nil {
			return nil, err
		}
		if cur >= index {
			return store, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("state at index %d, waiting for %d: %w", cur, index, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// SubmitPlan sends the plan to the leader's plan applier and waits for its
// result. When part of the plan was refused it returns a snapshot at least
// as new as the result's RefreshIndex.
func (w *worker) SubmitPlan(plan *structs.Plan) (*structs.PlanResult, scheduler.State, error) {
	if w.eval == nil {
		return nil, nil, errors.New("worker: submit plan without an evaluation")
	}
	plan.EvalID = w.eval.ID
	if plan.SnapshotIndex == 0 {
		plan.SnapshotIndex = w.snapIndex
	}
	// Scheduling may be slow on a big cluster: keep the evaluation ours.
	if err := w.srv.broker.OutstandingReset(w.eval.ID, w.evalToken); err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	future, err := w.srv.planQueue.Enqueue(plan, w.evalToken)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(w.ctx, planWaitLimit)
	defer cancel()
	result, err := future.Wait(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: plan result: %w", err)
	}
	w.srv.serverMetrics().observePlan(result)
	if result.RefreshIndex == 0 {
		return result, nil, nil
	}
	w.logger.Debug("plan partly refused; refreshing state", "eval_id", plan.EvalID, "refresh_index", result.RefreshIndex, "rejected_nodes", len(result.RejectedNodes))
	snap, err := w.snapshotMinIndex(w.ctx, result.RefreshIndex)
	if err != nil {
		return nil, nil, err
	}
	return result, snap, nil
}

// UpdateEval records the evaluation's outcome through Raft. An evaluation
// left blocked goes back to the blocked tracker.
func (w *worker) UpdateEval(eval *structs.Evaluation) error {
	return w.writeEval(eval, false)
}

// CreateEval records a new evaluation through Raft: a blocked one goes to
// the blocked tracker, a pending one to the eval broker.
func (w *worker) CreateEval(eval *structs.Evaluation) error {
	return w.writeEval(eval, true)
}

func (w *worker) writeEval(eval *structs.Evaluation, create bool) error {
	if eval == nil {
		return fmt.Errorf("worker: %w: nil evaluation", structs.ErrInvalid)
	}
	e := eval.Copy()
	now := time.Now().UnixNano()
	if create && e.CreateTime == 0 {
		e.CreateTime = now
	}
	e.ModifyTime = now
	if e.SnapshotIndex == 0 {
		e.SnapshotIndex = w.snapIndex
	}
	evals := []*structs.Evaluation{e}
	var followUp *structs.Evaluation
	if e.Status == structs.EvalStatusFailed && e.NextEval == "" {
		followUp = newFollowUpEval(e, now)
		e.NextEval = followUp.ID
		evals = append(evals, followUp)
	}
	_, index, err := w.srv.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals})
	if err != nil {
		return fmt.Errorf("worker: write eval %s: %w", e.ID, err)
	}
	if followUp != nil {
		w.logger.Warn("evaluation failed; follow-up scheduled", "eval_id", e.ID, "job_id", e.JobID, "reason", e.StatusDescription, "follow_up", followUp.ID)
		w.srv.enqueueFollowUp(followUp, index)
	}
	if create {
		e.CreateIndex = index
	}
	e.ModifyIndex = index
	switch e.Status {
	case structs.EvalStatusBlocked:
		w.srv.blocked.Block(e)
	case structs.EvalStatusPending:
		if create {
			w.srv.broker.Enqueue(e)
		}
	}
	return nil
}

// schedState adapts a state snapshot to scheduler.State.
type schedState struct {
	snap *state.StateSnapshot
}

var _ scheduler.State = (*schedState)(nil)

func (a *schedState) Nodes() ([]*structs.Node, error) { return a.snap.Nodes(nil) }
func (a *schedState) NodeByID(id string) (*structs.Node, error) {
	return a.snap.NodeByID(nil, id)
}
func (a *schedState) JobByID(id string) (*structs.Job, error) { return a.snap.JobByID(nil, id) }
func (a *schedState) AllocsByJob(jobID string) ([]*structs.Allocation, error) {
	return a.snap.AllocsByJob(nil, jobID)
}
func (a *schedState) AllocsByNode(nodeID string) ([]*structs.Allocation, error) {
	return a.snap.AllocsByNode(nil, nodeID)
}
func (a *schedState) LatestIndex() (uint64, error) { return a.snap.LatestIndex() }
func (a *schedState) LatestDeploymentByJobID(jobID string) (*structs.Deployment, error) {
	return a.snap.LatestDeploymentByJobID(nil, jobID)
}

// Endpoint aliases.
func (a *schedState) EndpointAliasesByEndpoint(ns, endpoint string) ([]*structs.EndpointAlias, error) {
	return a.snap.EndpointAliasesByEndpoint(nil, ns, endpoint)
}
