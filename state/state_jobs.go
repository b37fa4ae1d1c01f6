package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertJob registers or updates job at Raft index index and stores a copy.
// CreateIndex is set on the first registration and kept afterwards;
// ModifyIndex is always index. Version starts at 0 and, with JobModifyIndex
// = index, moves only when the spec changed (jobSpecChanged: everything but
// status, version, submit time and indexes is compared, Stop included).
// Each new version is also kept in the job versions table
// (state_job_versions.go); Stable starts false on a new version and is
// kept otherwise.
// Status is derived from the job's allocations and evaluations (see
// jobStatus). Errors wrap structs.ErrInvalid for a nil job or an empty ID.
func (s *StateStore) UpsertJob(index uint64, job *structs.Job) error {
	if job == nil || job.ID == "" {
		return invalid("job: nil or without ID")
	}
	txn := s.writeTxn()
	defer txn.Abort()
	if err := upsertJobTxn(txn, index, job); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// upsertJobTxn does UpsertJob's writes in txn.
func upsertJobTxn(txn *memdb.Txn, index uint64, job *structs.Job) error {
	j, err := safeCopy("job", job.ID, job.Copy)
	if err != nil {
		return err
	}
	existing, err := jobByIDTxn(txn, nil, job.ID)
	if err != nil {
		return err
	}
	newVersion := existing == nil
	if existing == nil {
		j.CreateIndex = index
		j.JobModifyIndex = index
		j.Version = 0
		j.Stable = false
	} else {
		j.CreateIndex = existing.CreateIndex
		j.JobModifyIndex = existing.JobModifyIndex
		j.Version = existing.Version
		j.Stable = existing.Stable
		if jobSpecChanged(existing, j) {
			j.JobModifyIndex = index
			j.Version = existing.Version + 1
			j.Stable = false
			newVersion = true
		}
	}
	if existing != nil && nsDefault(existing.Namespace) != nsDefault(j.Namespace) {
		// A job moved to another namespace starts its history there: the
		// version routes are authorized in the current namespace, so a
		// kept version of the old one would be readable, and revertible
		// (auto_revert too), by callers with no rights in it.
		if err := deleteJobVersionsTxn(txn, index, j.ID); err != nil {
			return err
		}
		j.Stable = false
		newVersion = true
	}
	j.ModifyIndex = index
	status, err := jobStatusTxn(txn, j, false)
	if err != nil {
		return err
	}
	j.Status = status
	if err := txn.Insert(TableJobs, j); err != nil {
		return fmt.Errorf("state: insert job %q: %w", j.ID, err)
	}
	if err := setIndex(txn, TableJobs, index); err != nil {
		return err
	}
	if newVersion {
		return upsertJobVersionTxn(txn, index, j)
	}
	return nil
}

// DeleteJob purges the job. Its allocations and evaluations stay: the
// scheduler stops the allocations of a missing job and EvalDeleteRequest
// garbage-collects them later. Errors wrap structs.ErrNotFound when the job
// does not exist.
func (s *StateStore) DeleteJob(index uint64, jobID string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	existing, err := jobByIDTxn(txn, nil, jobID)
	if err != nil {
		return err
	}
	if existing == nil {
		return notFound("job", jobID)
	}
	if err := txn.Delete(TableJobs, existing); err != nil {
		return fmt.Errorf("state: delete job %q: %w", jobID, err)
	}
	if err := deletePeriodicLaunchTxn(txn, index, jobID); err != nil {
		return err
	}
	if err := setIndex(txn, TableJobs, index); err != nil {
		return err
	}
	if err := deleteJobVersionsTxn(txn, index, jobID); err != nil {
		return err
	}
	if err := deleteJobDeploymentsTxn(txn, index, jobID); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// Jobs returns every job, sorted by ID.
func (s *StateStore) Jobs(ws memdb.WatchSet) ([]*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Job](txn, ws, TableJobs, "id")
}

// JobByID returns the job, or nil and no error when it does not exist.
func (s *StateStore) JobByID(ws memdb.WatchSet, id string) (*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return jobByIDTxn(txn, ws, id)
}

func jobByIDTxn(txn *memdb.Txn, ws memdb.WatchSet, id string) (*structs.Job, error) {
	return firstByID[structs.Job](txn, ws, TableJobs, "job", id)
}
