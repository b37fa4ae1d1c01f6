package server

import (
	"context"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// The leader's release of held children (max_running_children). A child
// counts as running while it is not held and not dead (state.ChildRunning:
// pending, waiting for placement, counts). A child registered while its
// parent has max_running_children running ones, or while an older sibling
// still waits, is held: stored with no evaluation. When a running child
// dies the jobs table changes, this loop wakes and asks the FSM to release
// the oldest waiting ones; the FSM recounts in the same transaction, so a
// release never starts more than the limit.

// releaseRetry is the pause after a release that failed.
const releaseRetry = time.Second

// childrenReleaseLoop releases held children as room appears until ctx
// ends (leadership lost).
func (s *Server) childrenReleaseLoop(ctx context.Context) {
	log := s.logger.Named("children")
	for ctx.Err() == nil {
		ws := memdb.NewWatchSet()
		wait := time.Duration(0)
		if err := s.releasePass(ctx, ws); err != nil && ctx.Err() == nil {
			log.Warn("release of held children failed", "error", err)
			wait = releaseRetry
		}
		waitChange(ctx, ws, wait)
	}
}

// releasePass releases, per parent, as many waiting children as its limit
// leaves room for (all of a parent that is gone or has no limit).
func (s *Server) releasePass(ctx context.Context, ws memdb.WatchSet) error {
	st := s.fsm.State()
	// A snapshot restore replaces the store: wake up and read the new one.
	ws.Add(st.AbandonCh())
	jobs, err := st.Jobs(ws)
	if err != nil {
		return err
	}
	parents := map[string]bool{}
	var order []string
	for _, j := range jobs {
		if state.ChildWaiting(j) && !parents[j.ParentID] {
			parents[j.ParentID] = true
			order = append(order, j.ParentID)
		}
	}
	for _, pid := range order {
		if ctx.Err() != nil {
			return nil
		}
		if err := s.releaseChildren(st, pid); err != nil {
			return err
		}
	}
	return nil
}

// releaseChildren commits the release of parentID's oldest waiting
// children that fit and enqueues their evaluations.
func (s *Server) releaseChildren(st *state.StateStore, parentID string) error {
	parent, err := st.JobByID(nil, parentID)
	if err != nil {
		return err
	}
	children, err := st.JobChildren(nil, parentID)
	if err != nil {
		return err
	}
	room := len(children)
	if parent != nil && parent.MaxRunningChildren > 0 {
		room = parent.MaxRunningChildren
		for _, c := range children {
			if state.ChildRunning(c) {
				room--
			}
		}
	}
	now := time.Now().UnixNano()
	var evals []*structs.Evaluation
	for _, c := range children {
		if len(evals) >= room {
			break
		}
		if state.ChildWaiting(c) {
			evals = append(evals, childEval(c, structs.EvalTriggerJobRegister, now))
		}
	}
	if len(evals) == 0 {
		return nil
	}
	raw, index, err := s.raftApply(structs.JobChildrenReleaseRequestType, &structs.JobChildrenReleaseRequest{ParentID: parentID, Evals: evals})
	if err != nil {
		return err
	}
	released, _ := raw.([]string)
	byJob := make(map[string]*structs.Evaluation, len(evals))
	for _, e := range evals {
		byJob[e.JobID] = e
	}
	for _, id := range released {
		if e := byJob[id]; e != nil {
			s.enqueueChildEval(e, index)
		}
	}
	return nil
}

// waitChange blocks until something ws watches changes, ctx ends, or, when
// wait is above zero, wait has passed.
func waitChange(ctx context.Context, ws memdb.WatchSet, wait time.Duration) {
	if wait <= 0 {
		_ = ws.WatchCtx(ctx)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_ = ws.WatchCtx(wctx)
}
