package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertPlanResults commits a verified plan at Raft index index in one
// transaction:
//   - Each stop in req.AllocsStopped updates a copy of the stored allocation
//     with the stop's DesiredStatus (stop when empty), DesiredDescription
//     and PreemptedByJob, ModifyIndex = AllocModifyIndex = index and
//     ModifyTime = req.UpdatedAt. Stops of unknown allocations are skipped.
//   - Each placement in req.AllocsPlaced is stored as a copy with
//     ModifyIndex = AllocModifyIndex = index and ModifyTime = req.UpdatedAt.
//     A new allocation gets CreateIndex = index, CreateTime = req.UpdatedAt
//     when unset, DesiredStatus run and ClientStatus pending when empty; an
//     existing one keeps its CreateIndex, CreateTime and client fields
//     (ClientStatus, ClientDescription, TaskStates). A placement without a
//     Job gets req.Job (the stored version of it when that version, same
//     JobModifyIndex, is stored), or else the stored job.
//   - req.Evals are upserted as by UpsertEvals.
//
// The statuses of the touched jobs are recomputed. Errors wrap
// structs.ErrInvalid for a nil request, a nil allocation or evaluation, or
// an empty ID; then nothing is written.
func (s *StateStore) UpsertPlanResults(index uint64, req *structs.ApplyPlanResultsRequest) error {
	if req == nil {
		return invalid("plan results: nil request")
	}
	txn := s.writeTxn()
	defer txn.Abort()
	jobs := map[string]struct{}{}
	touched := false
	// deployments holds the deployments whose allocations changed, to
	// refresh their counters.
	deployments := map[string]bool{}
	// nodes holds the nodes whose allocations changed server-side.
	nodes := map[string]bool{}
	if err := planDeploymentsTxn(txn, index, req); err != nil {
		return err
	}
	for _, stop := range req.AllocsStopped {
		if stop == nil || stop.ID == "" {
			return invalid("plan results: stopped allocation nil or without ID")
		}
		existing, err := allocByIDTxn(txn, nil, stop.ID)
		if err != nil {
			return err
		}
		if existing == nil {
			continue
		}
		// A shallow copy: only top-level fields change, and the stored
		// version's parts (resources, task states) are never mutated, so
		// the new version shares them instead of copying each.
		a := existing.ShallowCopy()
		a.DesiredStatus = stop.DesiredStatus
		if a.DesiredStatus == "" || a.DesiredStatus == structs.AllocDesiredStatusRun {
			a.DesiredStatus = structs.AllocDesiredStatusStop
		}
		a.DesiredDescription = stop.DesiredDescription
		// The fields taken from a stop match structs.NormalizedStop.
		a.PreemptedByJob = stop.PreemptedByJob
		a.ModifyIndex, a.AllocModifyIndex = index, index
		a.ModifyTime = req.UpdatedAt
		if err := txn.Insert(TableAllocs, a); err != nil {
			return fmt.Errorf("state: stop allocation %q: %w", a.ID, err)
		}
		nodes[a.NodeID] = true
		jobs[a.JobID] = struct{}{}
		touched = true
	}
	// The plan's job, decoded from the entry, is a copy of a stored job
	// version: when that version is stored (same registration), every
	// placement points at the stored one, so a job's allocations share one
	// *Job per version instead of one per plan.
	planJob := req.Job
	if planJob != nil {
		v, err := jobVersionTxn(txn, nil, planJob.ID, planJob.Version)
		if err != nil {
			return err
		}
		if v != nil && v.Namespace == planJob.Namespace && v.JobModifyIndex == planJob.JobModifyIndex {
			planJob = v
		}
	}
	for _, place := range req.AllocsPlaced {
		if place == nil || place.ID == "" {
			return invalid("plan results: placed allocation nil or without ID")
		}
		if err := place.CheckWellFormed(); err != nil {
			return err
		}
		a, err := safeCopy("allocation", place.ID, place.Copy)
		if err != nil {
			return err
		}
		existing, err := allocByIDTxn(txn, nil, place.ID)
		if err != nil {
			return err
		}
		if existing != nil {
			a.CreateIndex = existing.CreateIndex
			a.CreateTime = existing.CreateTime
			a.ClientStatus = existing.ClientStatus
			a.ClientDescription = existing.ClientDescription
			a.TaskStates = existing.TaskStates // stored objects are immutable: sharing is safe
			// The endpoint router's view is the client's (issue 14).
			a.EndpointMember = existing.EndpointMember.Copy()
			if existing.DeploymentID == a.DeploymentID && existing.DeploymentStatus != nil {
				// The health the client reported since the scheduler's
				// snapshot stands.
				a.DeploymentStatus = existing.DeploymentStatus.Copy()
			}
			if existing.DeploymentID != "" && existing.DeploymentID != a.DeploymentID {
				deployments[existing.DeploymentID] = true
			}
			nodes[existing.NodeID] = true
		} else {
			a.CreateIndex = index
			if a.CreateTime == 0 {
				a.CreateTime = req.UpdatedAt
			}
		}
		if a.DesiredStatus == "" {
			a.DesiredStatus = structs.AllocDesiredStatusRun
		}
		if a.ClientStatus == "" {
			a.ClientStatus = structs.AllocClientStatusPending
		}
		if a.Job == nil && planJob != nil && planJob.ID == a.JobID {
			a.Job = planJob
		}
		if a.Job == nil && a.JobID != "" {
			job, err := jobByIDTxn(txn, nil, a.JobID)
			if err != nil {
				return err
			}
			a.Job = job
		}
		compactPlacedAlloc(a)
		a.ModifyIndex, a.AllocModifyIndex = index, index
		a.ModifyTime = req.UpdatedAt
		if err := txn.Insert(TableAllocs, a); err != nil {
			return fmt.Errorf("state: place allocation %q: %w", a.ID, err)
		}
		nodes[a.NodeID] = true
		if a.DeploymentID != "" {
			deployments[a.DeploymentID] = true
		}
		jobs[a.JobID] = struct{}{}
		touched = true
	}
	if touched {
		if err := setIndex(txn, TableAllocs, index); err != nil {
			return err
		}
	}
	if err := nodeAllocsChangedTxn(txn, index, nodes); err != nil {
		return err
	}
	if err := upsertEvalsTxn(txn, index, req.Evals, jobs); err != nil {
		return err
	}
	if err := refreshDeploymentsTxn(txn, index, deployments); err != nil {
		return err
	}
	if err := updateJobStatusesTxn(txn, index, jobs, false); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// UpdateAllocsFromClient records client-side status at Raft index index:
// for each update, a copy of the stored allocation takes ClientStatus,
// ClientDescription and TaskStates (copied) from it, and Outputs and
// LogArchive when the update has them (kept otherwise; only digests with
// artifact metadata are recorded, and each gains the allocation as an
// AllocRefs entry in the same transaction), EndpointMember when the update
// has one (kept otherwise), with ModifyIndex =
// index and ModifyTime = updatedAt (Unix nanoseconds). AllocModifyIndex, the
// server-side change index, is kept. Unknown allocation IDs are skipped.
// The statuses of the touched jobs are recomputed. Errors wrap
// structs.ErrInvalid for a nil update or an empty ID; then nothing is
// written.
func (s *StateStore) UpdateAllocsFromClient(index uint64, allocs []*structs.Allocation, updatedAt int64) error {
	txn := s.writeTxn()
	defer txn.Abort()
	jobs := map[string]struct{}{}
	touched, artsTouched := false, false
	deployments := map[string]bool{}
	for _, upd := range allocs {
		if upd == nil || upd.ID == "" {
			return invalid("client update: allocation nil or without ID")
		}
		existing, err := allocByIDTxn(txn, nil, upd.ID)
		if err != nil {
			return err
		}
		if existing == nil {
			continue
		}
		// Check and copy only what is taken from the update, so a
		// malformed field elsewhere in it does not matter.
		if err := (&structs.Allocation{ID: upd.ID, TaskStates: upd.TaskStates}).CheckWellFormed(); err != nil {
			return err
		}
		// The stored copy shares its strings and event details with the
		// fleet's other allocations (storedTaskStates).
		states := storedTaskStates(upd.TaskStates)
		// A shallow copy, as for a stop: each field taken from the update
		// is replaced, never changed in place, so the parts the client does
		// not report (resources, job, metrics) are shared with the stored
		// version, not copied at every status update.
		a := existing.ShallowCopy()
		a.ClientStatus = intern(upd.ClientStatus)
		a.ClientDescription = intern(upd.ClientDescription)
		a.TaskStates = states
		// The endpoint router's view of the member (issue 14): an update
		// without one (sent before the router saw the member) keeps it.
		if upd.EndpointMember != nil {
			if err := upd.EndpointMember.CheckWellFormed(); err != nil {
				return err
			}
			a.EndpointMember = upd.EndpointMember.Copy()
		}
		if takeClientHealth(existing, upd) {
			// The client's health verdict is taken once, for an
			// allocation of a deployment that has none yet.
			ds := existing.DeploymentStatus.Copy()
			if ds == nil {
				ds = &structs.AllocDeploymentStatus{}
			}
			h := *upd.DeploymentStatus.Healthy
			ds.Healthy, ds.Timestamp = &h, upd.DeploymentStatus.Timestamp
			a.DeploymentStatus = ds
			deployments[a.DeploymentID] = true
		}
		// Outputs and the log archive come once, with the final update;
		// a later update without them (a status resent after a client
		// restart) keeps them.
		if len(upd.Outputs) > 0 || upd.LogArchive != "" {
			if err := structs.CheckAllocArtifacts(&structs.Allocation{ID: upd.ID, Outputs: upd.Outputs, LogArchive: upd.LogArchive}); err != nil {
				return err
			}
			// Each recorded digest gets this allocation as a reference in
			// the same transaction; one the servers do not store is not
			// listed (keepStoredOutputsTxn).
			outs, logArchive, refd, err := keepStoredOutputsTxn(txn, index, updatedAt, upd.ID, upd.Outputs, upd.LogArchive)
			if err != nil {
				return err
			}
			if len(outs) > 0 {
				a.Outputs = outs
			}
			if logArchive != "" {
				a.LogArchive = logArchive
			}
			artsTouched = artsTouched || refd
		}
		a.ModifyIndex = index
		a.ModifyTime = updatedAt
		if err := txn.Insert(TableAllocs, a); err != nil {
			return fmt.Errorf("state: update allocation %q: %w", a.ID, err)
		}
		// A finished allocation serves nothing: its service instances go
		// in the same transaction (Nomad does the same).
		if a.ClientTerminalStatus() {
			if err := deleteServicesByTxn(txn, index, "alloc", a.ID); err != nil {
				return err
			}
		}
		jobs[a.JobID] = struct{}{}
		touched = true
	}
	if touched {
		if err := setIndex(txn, TableAllocs, index); err != nil {
			return err
		}
	}
	if artsTouched {
		if err := setIndex(txn, TableArtifacts, index); err != nil {
			return err
		}
	}
	if err := refreshDeploymentsTxn(txn, index, deployments); err != nil {
		return err
	}
	if err := updateJobStatusesTxn(txn, index, jobs, false); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// Allocs returns every allocation, sorted by ID.
func (s *StateStore) Allocs(ws memdb.WatchSet) ([]*structs.Allocation, error) {
	return s.allocsBy(ws, "id")
}

// AllocByID returns the allocation, or nil and no error when it does not
// exist.
func (s *StateStore) AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return allocByIDTxn(txn, ws, id)
}

// AllocsByJob returns the job's allocations, terminal or not, sorted by ID.
func (s *StateStore) AllocsByJob(ws memdb.WatchSet, jobID string) ([]*structs.Allocation, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return allocsByJobTxn(txn, ws, jobID)
}

// AllocsByNode returns the node's allocations, terminal or not, sorted by
// ID.
func (s *StateStore) AllocsByNode(ws memdb.WatchSet, nodeID string) ([]*structs.Allocation, error) {
	if nodeID == "" {
		return nil, nil
	}
	return s.allocsBy(ws, "node", nodeID)
}

// AllocsByIDPrefix returns the allocations whose ID starts with prefix,
// sorted by ID, for the CLI's short IDs. An empty prefix returns every
// allocation.
func (s *StateStore) AllocsByIDPrefix(ws memdb.WatchSet, prefix string) ([]*structs.Allocation, error) {
	return s.allocsBy(ws, "id_prefix", prefix)
}

func (s *StateStore) allocsBy(ws memdb.WatchSet, index string, args ...interface{}) ([]*structs.Allocation, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Allocation](txn, ws, TableAllocs, index, args...)
}

func allocByIDTxn(txn *memdb.Txn, ws memdb.WatchSet, id string) (*structs.Allocation, error) {
	return firstByID[structs.Allocation](txn, ws, TableAllocs, "allocation", id)
}

func allocsByJobTxn(txn *memdb.Txn, ws memdb.WatchSet, jobID string) ([]*structs.Allocation, error) {
	if jobID == "" {
		return nil, nil
	}
	return getAll[structs.Allocation](txn, ws, TableAllocs, "job", jobID)
}
