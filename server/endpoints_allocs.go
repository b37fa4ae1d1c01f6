package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// minPrefixLen is the shortest ID prefix a get accepts, as the CLI's short
// IDs are 8 characters.
const minPrefixLen = 4

// EvalTriggerAllocFailure is the trigger of an evaluation created because
// a service allocation failed on its client, as Nomad names it.
const EvalTriggerAllocFailure = "alloc-failure"

// UpdateAllocs records client-side status of allocations (ClientStatus,
// ClientDescription, TaskStates) in one Raft entry, shared with the other
// callers' updates that arrive while one is being applied
// (alloc_update_batch.go). A service allocation or
// a gang member that failed gets a pending evaluation for its job, so the
// scheduler replaces it (a gang as a whole). It returns an error wrapping
// structs.ErrInvalid for an allocation without ID; one wrapping
// structs.ErrNotFound naming every allocation the leader does not know
// (nothing is applied: the caller drops those and resends the rest); and
// errors wrapping structs.ErrNotLeader, structs.ErrNotReady (a leader whose
// barrier has not applied the log: retry), structs.ErrOutcomeUnknown or
// structs.ErrShutdown.
func (s *Server) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	if len(allocs) == 0 {
		return nil
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.UpdateAllocs(fctx, allocs)
	}
	if err := s.readyForWrites(); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	store := s.fsm.State()
	req := &structs.AllocClientUpdateRequest{UpdatedAt: now}
	evalFor := map[string]bool{}
	var unknown []string
	for _, a := range allocs {
		if a == nil || a.ID == "" {
			return fmt.Errorf("update allocs: %w: allocation without ID", structs.ErrInvalid)
		}
		// Only the client's fields travel through Raft. What the FSM
		// would refuse is refused here, to this caller alone: in the FSM
		// it would fail the merged entry of every caller batched with it.
		if err := structs.CheckAllocArtifacts(a); err != nil {
			return fmt.Errorf("update allocs: %w", err)
		}
		if err := (&structs.Allocation{ID: a.ID, TaskStates: a.TaskStates}).CheckWellFormed(); err != nil {
			return fmt.Errorf("update allocs: %w", err)
		}
		if err := a.EndpointMember.CheckWellFormed(); err != nil {
			return fmt.Errorf("update allocs: allocation %q: %w", a.ID, err)
		}
		switch a.ClientStatus {
		case "", structs.AllocClientStatusPending, structs.AllocClientStatusRunning, structs.AllocClientStatusComplete,
			structs.AllocClientStatusFailed, structs.AllocClientStatusLost:
		default:
			return fmt.Errorf("update allocs: %w: allocation %q: unknown client status %q", structs.ErrInvalid, a.ID, clipStatus(a.ClientStatus))
		}
		// Copy only the two fields taken (the caller may keep its
		// allocation): copying the whole allocation twice, resources
		// and all, was a visible part of each report's cost.
		part := (&structs.Allocation{Outputs: a.Outputs, TaskStates: a.TaskStates}).Copy()
		upd := &structs.Allocation{ID: a.ID, ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
			Outputs: part.Outputs, TaskStates: part.TaskStates, LogArchive: a.LogArchive, EndpointMember: a.EndpointMember.Copy()}
		if ds := a.DeploymentStatus; ds != nil && ds.Healthy != nil {
			// The client's deployment health verdict (its Canary flag is
			// the server's; the state store keeps that).
			// Its time counts toward the progress deadline: one not
			// set, or later than the leader's clock (skew, or a value
			// whose sum with the deadline overflows), is the leader's.
			h, ts := *ds.Healthy, ds.Timestamp
			if ts <= 0 || ts > now {
				ts = now
			}
			upd.DeploymentStatus = &structs.AllocDeploymentStatus{Healthy: &h, Timestamp: ts}
		}
		req.Allocs = append(req.Allocs, upd)
		old, err := store.AllocByID(nil, a.ID)
		if err != nil {
			return fmt.Errorf("update allocs: %w", err)
		}
		if old == nil {
			unknown = append(unknown, a.ID)
			continue
		}
		if a.ClientStatus != structs.AllocClientStatusFailed {
			continue
		}
		if old.ClientStatus == structs.AllocClientStatusFailed || old.DesiredStatus != structs.AllocDesiredStatusRun || evalFor[old.JobID] {
			continue
		}
		job, err := store.JobByID(nil, old.JobID)
		if err != nil {
			return fmt.Errorf("update allocs: %w", err)
		}
		// A failed gang member, batch or service, restarts its whole gang;
		// a failed batch allocation is replaced only under a reschedule
		// policy.
		if job == nil || job.Stop || (job.Type != structs.JobTypeService && !job.IsGangGroup(old.TaskGroup) && !hasReschedulePolicy(job, old.TaskGroup)) {
			continue
		}
		evalFor[job.ID] = true
		req.Evals = append(req.Evals, &structs.Evaluation{
			ID: structs.GenerateUUID(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
			TriggeredBy: EvalTriggerAllocFailure, JobID: job.ID, JobModifyIndex: job.JobModifyIndex,
			Status: structs.EvalStatusPending, CreateTime: now, ModifyTime: now,
		})
	}
	if len(unknown) > 0 {
		// The leader's state holds every committed allocation (it is
		// ready): an unknown ID was never placed or was garbage collected.
		return fmt.Errorf("update allocs: unknown allocations %q (nothing was applied): %w", unknown, structs.ErrNotFound)
	}
	index, err := s.allocUpdates.applyAllocUpdate(req, s.applyAllocClientUpdate)
	if err != nil {
		return fmt.Errorf("update allocs: %w", err)
	}
	for _, e := range req.Evals {
		e.CreateIndex, e.ModifyIndex = index, index
		s.broker.Enqueue(e)
	}
	return nil
}

// applyAllocClientUpdate commits one AllocClientUpdate entry and returns
// its Raft index (also on an FSM error, which raftApply returns with it).
func (s *Server) applyAllocClientUpdate(req *structs.AllocClientUpdateRequest) (uint64, error) {
	_, index, err := s.raftApply(structs.AllocClientUpdateRequestType, req)
	return index, err
}

// AllocList returns the allocations whose ID starts with q.Prefix, as a
// blocking query on the allocs table.
func (s *Server) AllocList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		var allocs []*structs.Allocation
		var err error
		if prefix != "" {
			allocs, err = st.AllocsByIDPrefix(ws, prefix)
		} else {
			allocs, err = st.Allocs(ws)
		}
		if err != nil {
			return nil, 0, err
		}
		if allocs == nil {
			allocs = []*structs.Allocation{}
		}
		idx, err := st.Index(state.TableAllocs)
		return allocs, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Allocation), meta, nil
}

// AllocGet returns one allocation by ID or by a unique ID prefix of at
// least 4 characters, as a blocking query on the allocs table. It returns
// an error wrapping structs.ErrNotFound when none matches and
// structs.ErrInvalid, listing the matches, when a prefix matches several.
func (s *Server) AllocGet(ctx context.Context, allocID string, q *structs.QueryOptions) (*structs.Allocation, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.Index(state.TableAllocs)
		if err != nil {
			return nil, 0, err
		}
		a, err := st.AllocByID(ws, allocID)
		if err != nil || a != nil {
			return a, idx, err
		}
		if len(allocID) < minPrefixLen {
			return (*structs.Allocation)(nil), idx, nil
		}
		matches, err := st.AllocsByIDPrefix(ws, allocID)
		if err != nil {
			return nil, 0, err
		}
		switch len(matches) {
		case 0:
			return (*structs.Allocation)(nil), idx, nil
		case 1:
			return matches[0], idx, nil
		}
		ids := make([]string, len(matches))
		for i, m := range matches {
			ids[i] = m.ID
		}
		return nil, 0, ambiguous("allocation", allocID, ids)
	})
	if err != nil {
		return nil, meta, err
	}
	a, _ := resp.(*structs.Allocation)
	if a == nil {
		return nil, meta, fmt.Errorf("allocation %q: %w", allocID, structs.ErrNotFound)
	}
	return a, meta, nil
}

// ambiguous returns an error wrapping structs.ErrInvalid that lists the IDs
// a prefix matched.
func ambiguous(kind, prefix string, ids []string) error {
	return fmt.Errorf("%w: %s prefix %q matches %d: %s", structs.ErrInvalid, kind, prefix, len(ids), strings.Join(ids, ", "))
}

// hasReschedulePolicy reports whether the job's group has a reschedule
// block.
func hasReschedulePolicy(job *structs.Job, group string) bool {
	tg := job.LookupTaskGroup(group)
	return tg != nil && tg.ReschedulePolicy != nil
}

// clipStatus shortens a client status for an error message.
func clipStatus(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
