package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/server/deploymentwatcher"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// maxPromoteGroups bounds the group names of one promotion.
const maxPromoteGroups = 1000

// DeploymentList returns the deployments whose ID starts with q.Prefix,
// sorted by ID, as a blocking query on the deployments table.
func (s *Server) DeploymentList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Deployment, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		ds, err := st.Deployments(ws)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*structs.Deployment, 0, len(ds))
		for _, d := range ds {
			if strings.HasPrefix(d.ID, prefix) {
				out = append(out, d)
			}
		}
		idx, err := st.Index(state.TableDeployments)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Deployment), meta, nil
}

// DeploymentGet returns one deployment (a blocking query); an unknown ID
// gives an error wrapping structs.ErrNotFound.
func (s *Server) DeploymentGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Deployment, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		d, err := st.DeploymentByID(ws, id)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableDeployments)
		return d, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	d, _ := resp.(*structs.Deployment)
	if d == nil {
		return nil, meta, fmt.Errorf("deployment %q: %w", id, structs.ErrNotFound)
	}
	return d, meta, nil
}

// JobDeployments returns the job's deployments, newest first (a blocking
// query); an unknown job gives an empty list.
func (s *Server) JobDeployments(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Deployment, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		ds, err := st.DeploymentsByJobID(ws, jobID)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableDeployments)
		return ds, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Deployment), meta, nil
}

// DeploymentAllocations returns the deployment's allocations (a blocking
// query on the allocs table).
func (s *Server) DeploymentAllocations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		allocs, err := st.AllocsByDeployment(ws, id)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableAllocs)
		return allocs, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Allocation), meta, nil
}

// activeDeployment returns the stored deployment and its job, or errors
// wrapping structs.ErrNotFound (unknown) or structs.ErrInvalid (not
// running or paused).
func (s *Server) activeDeployment(id string) (*structs.Deployment, *structs.Job, error) {
	st := s.fsm.State()
	d, err := st.DeploymentByID(nil, id)
	if err != nil {
		return nil, nil, err
	}
	if d == nil {
		return nil, nil, fmt.Errorf("deployment %q: %w", id, structs.ErrNotFound)
	}
	if !d.Active() {
		return nil, nil, fmt.Errorf("deployment %q: %w: it is %s, not running or paused", id, structs.ErrInvalid, d.Status)
	}
	job, err := st.JobByID(nil, d.JobID)
	if err != nil {
		return nil, nil, err
	}
	if job == nil {
		return nil, nil, fmt.Errorf("job %q of deployment %q: %w", d.JobID, id, structs.ErrNotFound)
	}
	return d, job, nil
}

// deploymentEval is the evaluation a deployment change creates for job.
func deploymentEval(job *structs.Job, now int64) *structs.Evaluation {
	return &structs.Evaluation{
		ID: structs.GenerateUUID(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
		TriggeredBy: structs.EvalTriggerDeploymentWatcher, JobID: job.ID, JobModifyIndex: job.JobModifyIndex,
		Status: structs.EvalStatusPending, CreateTime: now, ModifyTime: now,
	}
}

// commitDeployment applies a deployment entry carrying eval and hands
// the evaluation to the broker.
func (s *Server) commitDeployment(t structs.MessageType, msg interface{}, eval *structs.Evaluation) (*structs.DeploymentUpdateResponse, error) {
	_, index, err := s.raftApply(t, msg)
	if err != nil {
		return nil, err
	}
	resp := &structs.DeploymentUpdateResponse{DeploymentModifyIndex: index, WriteMeta: structs.WriteMeta{Index: index}}
	if eval != nil {
		if j, err := s.fsm.State().JobByID(nil, eval.JobID); err == nil && j != nil {
			eval.JobModifyIndex = j.JobModifyIndex
		}
		eval.CreateIndex, eval.ModifyIndex = index, index
		s.broker.Enqueue(eval)
		resp.EvalID, resp.EvalCreateIndex = eval.ID, index
	}
	return resp, nil
}

// DeploymentPromote promotes the canaries of the named groups (All: every
// group with canaries) and creates an evaluation that replaces the old
// allocations. Errors wrap structs.ErrNotFound (unknown deployment),
// structs.ErrInvalid (not running, no such group, canaries not all
// healthy), structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) DeploymentPromote(ctx context.Context, args *structs.DeploymentPromoteArgs) (*structs.DeploymentUpdateResponse, error) {
	if args == nil || args.DeploymentID == "" {
		return nil, fmt.Errorf("deployment promote: %w: no deployment ID", structs.ErrInvalid)
	}
	if len(args.Groups) > maxPromoteGroups {
		return nil, fmt.Errorf("deployment promote: %w: Groups: at most %d, got %d", structs.ErrInvalid, maxPromoteGroups, len(args.Groups))
	}
	if !args.All && len(args.Groups) == 0 {
		return nil, fmt.Errorf("deployment promote: %w: name the groups to promote or set All", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.DeploymentPromote(fctx, args)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	_, job, err := s.activeDeployment(args.DeploymentID)
	if err != nil {
		return nil, fmt.Errorf("deployment promote: %w", err)
	}
	now := time.Now().UnixNano()
	eval := deploymentEval(job, now)
	req := &structs.DeploymentPromoteRequest{DeploymentID: args.DeploymentID, All: args.All, Groups: args.Groups, Eval: eval, UpdatedAt: now}
	resp, err := s.commitDeployment(structs.DeploymentPromoteRequestType, req, eval)
	if err != nil {
		return nil, fmt.Errorf("deployment promote: %w", err)
	}
	return resp, nil
}

// DeploymentFail marks an active deployment failed ("Deployment marked as
// failed"); with auto_revert the newest stable version is registered
// again in the same entry. Errors as DeploymentPromote's.
func (s *Server) DeploymentFail(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.DeploymentFail(fctx, id)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	d, job, err := s.activeDeployment(id)
	if err != nil {
		return nil, fmt.Errorf("deployment fail: %w", err)
	}
	versions, err := s.fsm.State().JobVersionsByID(nil, d.JobID)
	if err != nil {
		return nil, fmt.Errorf("deployment fail: %w", err)
	}
	dec := deploymentwatcher.Fail(d, versions, structs.DeploymentStatusDescriptionFailedByUser)
	now := time.Now().UnixNano()
	eval := deploymentEval(job, now)
	if dec.Revert != nil {
		dec.Revert.SubmitTime = now
		eval.TriggeredBy = structs.EvalTriggerRollingUpdate
	}
	req := &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: dec.Status, Job: dec.Revert, Eval: eval, UpdatedAt: now}
	resp, err := s.commitDeployment(structs.DeploymentStatusUpdateRequestType, req, eval)
	if err != nil {
		return nil, fmt.Errorf("deployment fail: %w", err)
	}
	if dec.Revert != nil {
		// The FSM drops a revert when the job moved on to a newer version
		// before the entry applied; only a revert that registered the
		// job at this index is reported.
		if cur, err := s.fsm.State().JobByID(nil, d.JobID); err == nil && cur != nil && cur.JobModifyIndex == resp.Index {
			v := dec.Revert.Version
			resp.RevertedJobVersion = &v
		}
	}
	return resp, nil
}

// DeploymentPause pauses (pause true: nothing more is replaced) or
// resumes an active deployment. Errors as DeploymentPromote's.
func (s *Server) DeploymentPause(ctx context.Context, id string, pause bool) (*structs.DeploymentUpdateResponse, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.DeploymentPause(fctx, id, pause)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	_, job, err := s.activeDeployment(id)
	if err != nil {
		return nil, fmt.Errorf("deployment pause: %w", err)
	}
	u := &structs.DeploymentStatusUpdate{DeploymentID: id, Status: structs.DeploymentStatusPaused, StatusDescription: structs.DeploymentStatusDescriptionPaused}
	now := time.Now().UnixNano()
	var eval *structs.Evaluation
	if !pause {
		u.Status, u.StatusDescription = structs.DeploymentStatusRunning, structs.DeploymentStatusDescriptionRunning
		eval = deploymentEval(job, now)
	}
	resp, err := s.commitDeployment(structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: u, Eval: eval, UpdatedAt: now}, eval)
	if err != nil {
		return nil, fmt.Errorf("deployment pause: %w", err)
	}
	return resp, nil
}

// DeploymentSetAllocHealth records a user's health verdict on allocations
// of a deployment whose groups use health_check = "manual"; the watcher
// then decides (an unhealthy one fails the deployment). Errors wrap
// structs.ErrInvalid (no IDs, too many, a group without manual health, an
// allocation of another deployment), structs.ErrNotFound, and those of
// DeploymentPromote.
func (s *Server) DeploymentSetAllocHealth(ctx context.Context, args *structs.DeploymentAllocHealthArgs) (*structs.DeploymentUpdateResponse, error) {
	if args == nil || args.DeploymentID == "" {
		return nil, fmt.Errorf("deployment allocation health: %w: no deployment ID", structs.ErrInvalid)
	}
	n := len(args.HealthyAllocationIDs) + len(args.UnhealthyAllocationIDs)
	if n == 0 {
		return nil, fmt.Errorf("deployment allocation health: %w: name allocations in HealthyAllocationIDs or UnhealthyAllocationIDs", structs.ErrInvalid)
	}
	if n > structs.MaxDeploymentAllocHealthIDs {
		return nil, fmt.Errorf("deployment allocation health: %w: at most %d allocation IDs, got %d", structs.ErrInvalid, structs.MaxDeploymentAllocHealthIDs, n)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.DeploymentSetAllocHealth(fctx, args)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	_, job, err := s.activeDeployment(args.DeploymentID)
	if err != nil {
		return nil, fmt.Errorf("deployment allocation health: %w", err)
	}
	st := s.fsm.State()
	for _, id := range append(append([]string{}, args.HealthyAllocationIDs...), args.UnhealthyAllocationIDs...) {
		a, err := st.AllocByID(nil, id)
		if err != nil {
			return nil, err
		}
		if a == nil {
			return nil, fmt.Errorf("deployment allocation health: allocation %q: %w", id, structs.ErrNotFound)
		}
		tg := job.LookupTaskGroup(a.TaskGroup)
		if tg == nil || tg.Update == nil || tg.Update.HealthCheck != structs.UpdateHealthCheckManual {
			return nil, fmt.Errorf("deployment allocation health: %w: group %q of allocation %q does not use health_check = %q",
				structs.ErrInvalid, a.TaskGroup, id, structs.UpdateHealthCheckManual)
		}
	}
	now := time.Now().UnixNano()
	eval := deploymentEval(job, now)
	req := &structs.DeploymentAllocHealthRequest{DeploymentID: args.DeploymentID, HealthyAllocationIDs: args.HealthyAllocationIDs,
		UnhealthyAllocationIDs: args.UnhealthyAllocationIDs, Timestamp: now, Eval: eval}
	resp, err := s.commitDeployment(structs.DeploymentAllocHealthRequestType, req, eval)
	if err != nil {
		return nil, fmt.Errorf("deployment allocation health: %w", err)
	}
	return resp, nil
}
