package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// JobRegister canonicalizes and validates job, then commits it with a
// pending job-register evaluation in one Raft entry and hands the
// evaluation to the eval broker. It returns the *structs.ValidationError of
// an invalid job as is (errors.Is(err, structs.ErrInvalid)), an error
// wrapping structs.ErrEndpointConflict when another live job of the
// namespace declares one of its endpoint names, and errors wrapping
// structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) JobRegister(ctx context.Context, job *structs.Job) (*structs.JobRegisterResponse, error) {
	return s.jobRegister(ctx, job, nil)
}

// jobRegister is JobRegister; prior, when set, is the version the stored
// job must have when the entry is applied (the FSM refuses it otherwise
// with an error wrapping structs.ErrInvalid).
func (s *Server) jobRegister(ctx context.Context, job *structs.Job, prior *uint64) (*structs.JobRegisterResponse, error) {
	if job == nil {
		return nil, fmt.Errorf("job register: %w: no job", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.JobRegister(fctx, job)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	job = job.Copy()
	if err := childFieldsProblem(job); err != nil {
		return nil, err
	}
	job.Canonicalize()
	if err := job.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkJobNodePool(job); err != nil {
		return nil, err
	}
	if len(job.EndpointNames()) > 0 {
		s.endpointNamesMu.Lock()
		defer s.endpointNamesMu.Unlock()
		if err := fsm.EndpointNameConflict(s.fsm.State(), job); err != nil {
			return nil, err
		}
	}
	now := time.Now().UnixNano()
	job.SubmitTime = now
	if job.IsParent() {
		// A periodic or parameterized job gets no evaluation (Nomad's
		// rule): it is never placed. One that replaces a job that was
		// placed still needs one, to stop those allocations.
		prev, err := s.fsm.State().JobByID(nil, job.ID)
		if err != nil {
			return nil, fmt.Errorf("job register %q: %w", job.ID, err)
		}
		if prev == nil || prev.IsParent() {
			return s.registerParent(job, prior)
		}
	}
	eval := &structs.Evaluation{
		ID:          structs.GenerateUUID(),
		Namespace:   job.Namespace,
		Priority:    job.Priority,
		Type:        job.Type,
		TriggeredBy: structs.EvalTriggerJobRegister,
		JobID:       job.ID,
		Status:      structs.EvalStatusPending,
		CreateTime:  now,
		ModifyTime:  now,
	}
	_, index, err := s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: eval, PriorVersion: prior})
	if err != nil {
		return nil, fmt.Errorf("job register %q: %w", job.ID, err)
	}
	resp := &structs.JobRegisterResponse{EvalID: eval.ID, EvalCreateIndex: index, WriteMeta: structs.WriteMeta{Index: index}}
	stored, err := s.fsm.State().JobByID(nil, job.ID)
	if err != nil {
		return nil, fmt.Errorf("job register %q: read back: %w", job.ID, err)
	}
	if stored != nil {
		resp.JobModifyIndex = stored.JobModifyIndex
		eval.JobModifyIndex = stored.JobModifyIndex
	}
	eval.CreateIndex, eval.ModifyIndex = index, index
	s.broker.Enqueue(eval)
	return resp, nil
}

// registerParent commits a periodic or parameterized job without an
// evaluation.
func (s *Server) registerParent(job *structs.Job, prior *uint64) (*structs.JobRegisterResponse, error) {
	_, index, err := s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, PriorVersion: prior})
	if err != nil {
		return nil, fmt.Errorf("job register %q: %w", job.ID, err)
	}
	resp := &structs.JobRegisterResponse{WriteMeta: structs.WriteMeta{Index: index}}
	if stored, err := s.fsm.State().JobByID(nil, job.ID); err == nil && stored != nil {
		resp.JobModifyIndex = stored.JobModifyIndex
	}
	return resp, nil
}

// JobDeregister stops a job (purge=false) or removes it (purge=true) and
// commits a job-deregister evaluation that stops its allocations. It
// returns an error wrapping structs.ErrNotFound for an unknown job, and
// errors wrapping structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) JobDeregister(ctx context.Context, jobID string, purge bool) (*structs.JobDeregisterResponse, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.JobDeregister(fctx, jobID, purge)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	job, err := s.fsm.State().JobByID(nil, jobID)
	if err != nil {
		return nil, fmt.Errorf("job deregister %q: %w", jobID, err)
	}
	if job == nil {
		return nil, fmt.Errorf("job %q: %w", jobID, structs.ErrNotFound)
	}
	now := time.Now().UnixNano()
	eval := &structs.Evaluation{
		ID:             structs.GenerateUUID(),
		Namespace:      job.Namespace,
		Priority:       job.Priority,
		Type:           job.Type,
		TriggeredBy:    structs.EvalTriggerJobDeregister,
		JobID:          job.ID,
		JobModifyIndex: job.JobModifyIndex,
		Status:         structs.EvalStatusPending,
		CreateTime:     now,
		ModifyTime:     now,
	}
	_, index, err := s.raftApply(structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{JobID: jobID, Purge: purge, Eval: eval})
	if err != nil {
		return nil, fmt.Errorf("job deregister %q: %w", jobID, err)
	}
	// The job's blocked evaluation is moot now; the new one decides.
	s.blocked.Untrack(job.Namespace, job.ID)
	eval.CreateIndex, eval.ModifyIndex = index, index
	s.broker.Enqueue(eval)
	resp := &structs.JobDeregisterResponse{EvalID: eval.ID, EvalCreateIndex: index, WriteMeta: structs.WriteMeta{Index: index}}
	if stored, err := s.fsm.State().JobByID(nil, jobID); err == nil && stored != nil {
		resp.JobModifyIndex = stored.JobModifyIndex
	}
	return resp, nil
}

// JobList returns the jobs whose ID starts with q.Prefix, sorted by ID, as
// a blocking query on the jobs table.
func (s *Server) JobList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		jobs, err := st.Jobs(ws)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*structs.Job, 0, len(jobs))
		for _, j := range jobs {
			if strings.HasPrefix(j.ID, prefix) {
				out = append(out, j)
			}
		}
		idx, err := st.Index(state.TableJobs)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Job), meta, nil
}

// JobGet returns one job, as a blocking query on the jobs table. A job that
// does not exist (still, after the wait) gives an error wrapping
// structs.ErrNotFound.
func (s *Server) JobGet(ctx context.Context, jobID string, q *structs.QueryOptions) (*structs.Job, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		job, err := st.JobByID(ws, jobID)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableJobs)
		return job, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	job, _ := resp.(*structs.Job)
	if job == nil {
		return nil, meta, fmt.Errorf("job %q: %w", jobID, structs.ErrNotFound)
	}
	return job, meta, nil
}

// JobAllocations returns a job's allocations, as a blocking query on the
// allocs table. An unknown job gives an empty list, not an error.
func (s *Server) JobAllocations(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		allocs, err := st.AllocsByJob(ws, jobID)
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

// JobEvaluations returns a job's evaluations, as a blocking query on the
// evals table. An unknown job gives an empty list, not an error.
func (s *Server) JobEvaluations(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Evaluation, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		evals, err := st.EvalsByJob(ws, jobID)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableEvals)
		return evals, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Evaluation), meta, nil
}

func queryPrefix(q *structs.QueryOptions) string {
	if q == nil {
		return ""
	}
	return q.Prefix
}
