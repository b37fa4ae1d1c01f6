package state

import (
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// maxDeploymentsPerJob bounds the deployments kept per job: once a job has
// more, its oldest terminal ones are removed.
const maxDeploymentsPerJob = 2 * structs.JobTrackedVersions

// Deployments returns every deployment, sorted by ID.
func (s *StateStore) Deployments(ws memdb.WatchSet) ([]*structs.Deployment, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Deployment](txn, ws, TableDeployments, "id")
}

// DeploymentByID returns the deployment, or nil and no error when it does
// not exist.
func (s *StateStore) DeploymentByID(ws memdb.WatchSet, id string) (*structs.Deployment, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return deploymentByIDTxn(txn, ws, id)
}

// DeploymentsByJobID returns the job's deployments, newest (highest
// CreateIndex) first.
func (s *StateStore) DeploymentsByJobID(ws memdb.WatchSet, jobID string) ([]*structs.Deployment, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return deploymentsByJobTxn(txn, ws, jobID)
}

// LatestDeploymentByJobID returns the job's newest deployment, or nil.
func (s *StateStore) LatestDeploymentByJobID(ws memdb.WatchSet, jobID string) (*structs.Deployment, error) {
	ds, err := s.DeploymentsByJobID(ws, jobID)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return ds[0], nil
}

// AllocsByDeployment returns the deployment's allocations.
func (s *StateStore) AllocsByDeployment(ws memdb.WatchSet, deploymentID string) ([]*structs.Allocation, error) {
	return s.allocsBy(ws, "deployment", deploymentID)
}

func deploymentByIDTxn(txn *memdb.Txn, ws memdb.WatchSet, id string) (*structs.Deployment, error) {
	return firstByID[structs.Deployment](txn, ws, TableDeployments, "deployment", id)
}

func deploymentsByJobTxn(txn *memdb.Txn, ws memdb.WatchSet, jobID string) ([]*structs.Deployment, error) {
	ds, err := getAll[structs.Deployment](txn, ws, TableDeployments, "job", jobID)
	if err != nil {
		return nil, err
	}
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].CreateIndex != ds[j].CreateIndex {
			return ds[i].CreateIndex > ds[j].CreateIndex
		}
		return ds[i].ID > ds[j].ID
	})
	return ds, nil
}

// upsertDeploymentTxn stores a copy of d at index: a new one gets
// CreateIndex index; an existing one keeps it and its CreateTime. The
// job's oldest terminal deployments beyond maxDeploymentsPerJob are
// removed.
func upsertDeploymentTxn(txn *memdb.Txn, index uint64, d *structs.Deployment) error {
	if d == nil || d.ID == "" || d.JobID == "" {
		return invalid("deployment: nil or without ID or job ID")
	}
	c, err := safeCopy("deployment", d.ID, d.Copy)
	if err != nil {
		return err
	}
	existing, err := deploymentByIDTxn(txn, nil, d.ID)
	if err != nil {
		return err
	}
	if existing != nil {
		c.CreateIndex, c.CreateTime = existing.CreateIndex, existing.CreateTime
	} else {
		c.CreateIndex = index
	}
	c.ModifyIndex = index
	if err := txn.Insert(TableDeployments, c); err != nil {
		return fmt.Errorf("state: insert deployment %q: %w", d.ID, err)
	}
	all, err := deploymentsByJobTxn(txn, nil, d.JobID)
	if err != nil {
		return err
	}
	for i := len(all) - 1; i >= maxDeploymentsPerJob; i-- {
		if all[i].Active() {
			continue
		}
		if err := txn.Delete(TableDeployments, all[i]); err != nil {
			return fmt.Errorf("state: prune deployment %q: %w", all[i].ID, err)
		}
	}
	return setIndex(txn, TableDeployments, index)
}

// deleteJobDeploymentsTxn removes every deployment of the job.
func deleteJobDeploymentsTxn(txn *memdb.Txn, index uint64, jobID string) error {
	all, err := deploymentsByJobTxn(txn, nil, jobID)
	if err != nil || len(all) == 0 {
		return err
	}
	for _, d := range all {
		if err := txn.Delete(TableDeployments, d); err != nil {
			return fmt.Errorf("state: delete deployment %q: %w", d.ID, err)
		}
	}
	return setIndex(txn, TableDeployments, index)
}

// updateDeploymentStatusTxn sets a deployment's status at index, with
// ModifyTime now. A deployment that becomes successful marks its job
// version stable (when that version is still kept). Errors wrap
// structs.ErrNotFound for an unknown deployment and structs.ErrInvalid for
// an unknown status.
func updateDeploymentStatusTxn(txn *memdb.Txn, index uint64, u *structs.DeploymentStatusUpdate, now int64) error {
	if u == nil || u.DeploymentID == "" {
		return invalid("deployment status update: nil or without deployment ID")
	}
	switch u.Status {
	case structs.DeploymentStatusRunning, structs.DeploymentStatusPaused, structs.DeploymentStatusFailed,
		structs.DeploymentStatusSuccessful, structs.DeploymentStatusCancelled:
	default:
		return invalid("deployment status update: unknown status %q", u.Status)
	}
	d, err := deploymentByIDTxn(txn, nil, u.DeploymentID)
	if err != nil {
		return err
	}
	if d == nil {
		return notFound("deployment", u.DeploymentID)
	}
	c := d.Copy()
	c.Status, c.StatusDescription = u.Status, u.StatusDescription
	if now != 0 {
		c.ModifyTime = now
	}
	if err := upsertDeploymentTxn(txn, index, c); err != nil {
		return err
	}
	if u.Status == structs.DeploymentStatusSuccessful {
		v, err := jobVersionTxn(txn, nil, d.JobID, d.JobVersion)
		if err != nil {
			return err
		}
		if v != nil && !v.Stable {
			return updateJobStabilityTxn(txn, index, d.JobID, d.JobVersion, true)
		}
	}
	return nil
}

// refreshDeploymentTxn derives a deployment's per-group counters from its
// allocations: PlacedAllocs, HealthyAllocs, UnhealthyAllocs,
// PlacedCanaries, and RequireProgressBy (the latest placement or healthy
// time of the group's allocations plus ProgressDeadline; 0 before any
// placement, so a canary waiting for room does not run down the deadline).
// It writes only when something changed.
func refreshDeploymentTxn(txn *memdb.Txn, index uint64, id string) error {
	d, err := deploymentByIDTxn(txn, nil, id)
	if err != nil || d == nil {
		return err
	}
	allocs, err := getAll[structs.Allocation](txn, nil, TableAllocs, "deployment", id)
	if err != nil {
		return err
	}
	c := d.Copy()
	last := map[string]int64{}
	for _, st := range c.TaskGroups {
		st.PlacedAllocs, st.HealthyAllocs, st.UnhealthyAllocs, st.PlacedCanaries = 0, 0, 0, nil
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].ID < allocs[j].ID })
	for _, a := range allocs {
		st := c.TaskGroups[a.TaskGroup]
		if st == nil {
			continue
		}
		st.PlacedAllocs++
		ds := a.DeploymentStatus
		if ds.IsCanary() {
			st.PlacedCanaries = append(st.PlacedCanaries, a.ID)
		}
		t := a.CreateTime
		switch {
		case ds.IsHealthy():
			st.HealthyAllocs++
			t = max(t, ds.Timestamp)
		case ds.IsUnhealthy():
			st.UnhealthyAllocs++
		}
		last[a.TaskGroup] = max(last[a.TaskGroup], t)
	}
	for name, st := range c.TaskGroups {
		if st.ProgressDeadline > 0 && st.PlacedAllocs > 0 {
			// Never earlier than before: a promotion restarts the
			// deadline from its own time (PromoteDeployment).
			st.RequireProgressBy = max(st.RequireProgressBy, last[name]+int64(st.ProgressDeadline))
		}
	}
	if reflect.DeepEqual(c.TaskGroups, d.TaskGroups) {
		return nil
	}
	return upsertDeploymentTxn(txn, index, c)
}

// UpdateDeploymentStatus applies a DeploymentStatusUpdateRequest's status
// change at index (the FSM registers its Job and Eval separately).
// Errors: see updateDeploymentStatusTxn; nothing is written on error.
func (s *StateStore) UpdateDeploymentStatus(index uint64, u *structs.DeploymentStatusUpdate, now int64) error {
	txn := s.writeTxn()
	defer txn.Abort()
	if err := updateDeploymentStatusTxn(txn, index, u, now); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// PromoteDeployment marks the canaries of the request's groups (All:
// every group with canaries) promoted at index. It returns errors wrapping
// structs.ErrNotFound for an unknown deployment and structs.ErrInvalid for
// a deployment that is not running, a group without canaries or not in
// the deployment, or a group whose canaries are not all healthy; nothing
// is written then.
func (s *StateStore) PromoteDeployment(index uint64, req *structs.DeploymentPromoteRequest) error {
	if req == nil {
		return invalid("deployment promote: nil request")
	}
	txn := s.writeTxn()
	defer txn.Abort()
	d, err := deploymentByIDTxn(txn, nil, req.DeploymentID)
	if err != nil {
		return err
	}
	if d == nil {
		return notFound("deployment", req.DeploymentID)
	}
	if d.Status != structs.DeploymentStatusRunning {
		return invalid("deployment %q is %s: only a running deployment can be promoted", d.ID, d.Status)
	}
	groups := req.Groups
	if req.All {
		groups = nil
		for name, st := range d.TaskGroups {
			if st.DesiredCanaries > 0 && !st.Promoted {
				groups = append(groups, name)
			}
		}
		sort.Strings(groups)
	}
	if len(groups) == 0 {
		return invalid("deployment %q has no canaries to promote", d.ID)
	}
	c := d.Copy()
	for _, g := range groups {
		st := c.TaskGroups[g]
		if st == nil {
			return invalid("deployment %q has no group %q", d.ID, g)
		}
		if st.DesiredCanaries == 0 {
			return invalid("group %q of deployment %q has no canaries", g, d.ID)
		}
		if st.HealthyAllocs < st.DesiredCanaries {
			return invalid("group %q has %d/%d healthy canaries: promote once they are healthy", g, st.HealthyAllocs, st.DesiredCanaries)
		}
		st.Promoted = true
		if st.ProgressDeadline > 0 && req.UpdatedAt != 0 {
			// The promotion is progress: the deadline restarts from it
			// (as Nomad), as the canaries may have waited past it.
			st.RequireProgressBy = max(st.RequireProgressBy, req.UpdatedAt+int64(st.ProgressDeadline))
		}
	}
	if c.RequiresPromotion() {
		c.StatusDescription = structs.DeploymentStatusDescriptionRunningNeedsPromotion
	} else {
		c.StatusDescription = structs.DeploymentStatusDescriptionRunning
	}
	if req.UpdatedAt != 0 {
		c.ModifyTime = req.UpdatedAt
	}
	if err := upsertDeploymentTxn(txn, index, c); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// SetAllocDeploymentHealth records the health of allocations of a
// deployment at index (timestamp in Unix nanoseconds), and applies the
// request's status update when set. Errors wrap structs.ErrNotFound for an
// unknown deployment or allocation and structs.ErrInvalid for an
// allocation of another deployment; nothing is written then.
func (s *StateStore) SetAllocDeploymentHealth(index uint64, req *structs.DeploymentAllocHealthRequest) error {
	if req == nil {
		return invalid("deployment alloc health: nil request")
	}
	txn := s.writeTxn()
	defer txn.Abort()
	d, err := deploymentByIDTxn(txn, nil, req.DeploymentID)
	if err != nil {
		return err
	}
	if d == nil {
		return notFound("deployment", req.DeploymentID)
	}
	set := func(ids []string, healthy bool) error {
		for _, id := range ids {
			a, err := allocByIDTxn(txn, nil, id)
			if err != nil {
				return err
			}
			if a == nil {
				return notFound("allocation", id)
			}
			if a.DeploymentID != d.ID {
				return invalid("allocation %q is not part of deployment %q", id, d.ID)
			}
			c := a.Copy()
			if c.DeploymentStatus == nil {
				c.DeploymentStatus = &structs.AllocDeploymentStatus{}
			}
			h := healthy
			c.DeploymentStatus.Healthy, c.DeploymentStatus.Timestamp = &h, req.Timestamp
			c.ModifyIndex = index
			if err := txn.Insert(TableAllocs, c); err != nil {
				return fmt.Errorf("state: update allocation %q: %w", id, err)
			}
		}
		return nil
	}
	if err := set(req.HealthyAllocationIDs, true); err != nil {
		return err
	}
	if err := set(req.UnhealthyAllocationIDs, false); err != nil {
		return err
	}
	if len(req.HealthyAllocationIDs)+len(req.UnhealthyAllocationIDs) > 0 {
		if err := setIndex(txn, TableAllocs, index); err != nil {
			return err
		}
	}
	if err := refreshDeploymentTxn(txn, index, d.ID); err != nil {
		return err
	}
	if req.DeploymentUpdate != nil {
		if err := updateDeploymentStatusTxn(txn, index, req.DeploymentUpdate, req.Timestamp); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// DeploymentRestore inserts a deployment. Errors wrap structs.ErrInvalid
// for a nil deployment or an empty ID.
func (r *StateRestore) DeploymentRestore(d *structs.Deployment) error {
	if d == nil || d.ID == "" {
		return invalid("restore deployment: nil or without ID")
	}
	return r.insert(TableDeployments, d.ID, d)
}

// planDeploymentsTxn stores a plan's new or updated deployment and its
// status updates of other deployments.
func planDeploymentsTxn(txn *memdb.Txn, index uint64, req *structs.ApplyPlanResultsRequest) error {
	if d := req.Deployment; d != nil {
		existing, err := deploymentByIDTxn(txn, nil, d.ID)
		if err != nil {
			return err
		}
		if existing != nil {
			// The scheduler's copy may be stale (a promotion since its
			// snapshot): only its description of a running deployment
			// is taken.
			if existing.Status != structs.DeploymentStatusRunning || existing.StatusDescription == d.StatusDescription {
				d = nil
			} else {
				c := existing.Copy()
				c.StatusDescription = d.StatusDescription
				c.ModifyTime = req.UpdatedAt
				d = c
			}
		}
		if d != nil {
			if err := upsertDeploymentTxn(txn, index, d); err != nil {
				return err
			}
		}
	}
	for _, u := range req.DeploymentUpdates {
		err := updateDeploymentStatusTxn(txn, index, u, req.UpdatedAt)
		if errors.Is(err, structs.ErrNotFound) {
			continue // removed since the scheduler's snapshot
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// refreshDeploymentsTxn refreshes the counters of each deployment in ids,
// in ID order.
func refreshDeploymentsTxn(txn *memdb.Txn, index uint64, ids map[string]bool) error {
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		if err := refreshDeploymentTxn(txn, index, id); err != nil {
			return err
		}
	}
	return nil
}

// takeClientHealth reports whether a client update's health verdict is
// recorded: the allocation belongs to a deployment, has no verdict yet,
// and the update carries one.
func takeClientHealth(existing, upd *structs.Allocation) bool {
	return existing.DeploymentID != "" && upd.DeploymentStatus != nil && upd.DeploymentStatus.Healthy != nil &&
		(existing.DeploymentStatus == nil || existing.DeploymentStatus.Healthy == nil)
}
