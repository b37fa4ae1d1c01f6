package server

import (
	"context"
	"fmt"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// JobVersions returns the kept versions of a job, newest first, as a
// blocking query on the job versions table. A job stored before versions
// were kept lists its current version alone. An unknown job gives an error
// wrapping structs.ErrNotFound.
func (s *Server) JobVersions(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		cur, err := st.JobByID(ws, jobID)
		if err != nil {
			return nil, 0, err
		}
		versions, err := st.JobVersionsByID(ws, jobID)
		if err != nil {
			return nil, 0, err
		}
		if cur != nil && (len(versions) == 0 || versions[0].Version < cur.Version) {
			versions = append([]*structs.Job{cur}, versions...)
		}
		if cur == nil {
			versions = nil
		}
		idx, err := st.Index(state.TableJobVersions)
		if err != nil {
			return nil, 0, err
		}
		jidx, err := st.Index(state.TableJobs)
		return versions, max(idx, jidx), err
	})
	if err != nil {
		return nil, meta, err
	}
	versions, _ := resp.([]*structs.Job)
	if len(versions) == 0 {
		return nil, meta, fmt.Errorf("job %q: %w", jobID, structs.ErrNotFound)
	}
	return versions, meta, nil
}

// JobRevert registers the kept version req.JobVersion of the job again,
// as a new version (Nomad's job revert): the spec of the old version, the
// next version number, a new evaluation. It returns errors wrapping
// structs.ErrNotFound for an unknown job or a version not kept,
// structs.ErrInvalid when the version is the current one or, with
// EnforcePriorVersion, when the current version is another, and those of
// JobRegister.
func (s *Server) JobRevert(ctx context.Context, req *structs.JobRevertRequest) (*structs.JobRegisterResponse, error) {
	if req == nil || req.JobID == "" {
		return nil, fmt.Errorf("job revert: %w: no job ID", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.JobRevert(fctx, req)
	}
	st := s.fsm.State()
	cur, err := st.JobByID(nil, req.JobID)
	if err != nil {
		return nil, fmt.Errorf("job revert %q: %w", req.JobID, err)
	}
	if cur == nil {
		return nil, fmt.Errorf("job %q: %w", req.JobID, structs.ErrNotFound)
	}
	if req.EnforcePriorVersion != nil && *req.EnforcePriorVersion != cur.Version {
		return nil, fmt.Errorf("job revert %q: %w: EnforcePriorVersion: current version is %d, not %d",
			req.JobID, structs.ErrInvalid, cur.Version, *req.EnforcePriorVersion)
	}
	if req.JobVersion == cur.Version {
		return nil, fmt.Errorf("job revert %q: %w: JobVersion: %d is the current version", req.JobID, structs.ErrInvalid, req.JobVersion)
	}
	old, err := st.JobByIDAndVersion(nil, req.JobID, req.JobVersion)
	if err != nil {
		return nil, fmt.Errorf("job revert %q: %w", req.JobID, err)
	}
	if old == nil {
		return nil, fmt.Errorf("job %q has no version %d kept (the servers keep its last %d versions and its newest stable one; gpulayer job history %s lists them): %w",
			req.JobID, req.JobVersion, structs.JobTrackedVersions, req.JobID, structs.ErrNotFound)
	}
	job := old.Copy()
	job.Stop = false
	job.Stable = false
	// The prior version is checked again when the entry applies: a write
	// between this read and the commit fails the revert rather than being
	// silently overwritten.
	return s.jobRegister(ctx, job, req.EnforcePriorVersion)
}

// JobStability sets Stable on a kept version of the job through Raft. It
// returns errors wrapping structs.ErrNotFound for an unknown job or a
// version not kept, and structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) JobStability(ctx context.Context, req *structs.JobStabilityRequest) (uint64, error) {
	if req == nil || req.JobID == "" {
		return 0, fmt.Errorf("job stability: %w: no job ID", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.JobStability(fctx, req)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	_, index, err := s.raftApply(structs.JobStabilityRequestType, req)
	if err != nil {
		return 0, fmt.Errorf("job stability %q: %w", req.JobID, err)
	}
	return index, nil
}
