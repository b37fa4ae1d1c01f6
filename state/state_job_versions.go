package state

import (
	"fmt"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// upsertJobVersionTxn records job (already stored in the jobs table) as a
// version and prunes the job's versions to structs.JobTrackedVersions,
// oldest first, keeping the newest stable version when it would be pruned
// (Nomad's rule: auto_revert needs a stable version to go back to).
func upsertJobVersionTxn(txn *memdb.Txn, index uint64, job *structs.Job) error {
	if err := txn.Insert(TableJobVersions, job); err != nil {
		return fmt.Errorf("state: insert job version %q v%d: %w", job.ID, job.Version, err)
	}
	all, err := jobVersionsTxn(txn, nil, job.ID)
	if err != nil {
		return err
	}
	if len(all) > structs.JobTrackedVersions {
		keep := structs.JobTrackedVersions
		if !anyStable(all[:keep]) {
			for i := keep; i < len(all); i++ {
				if all[i].Stable {
					// Bring the newest stable version into the kept set
					// in place of the oldest kept one.
					all[keep-1], all[i] = all[i], all[keep-1]
					break
				}
			}
		}
		for _, old := range all[keep:] {
			if err := txn.Delete(TableJobVersions, old); err != nil {
				return fmt.Errorf("state: prune job version %q v%d: %w", old.ID, old.Version, err)
			}
		}
	}
	return setIndex(txn, TableJobVersions, index)
}

func anyStable(jobs []*structs.Job) bool {
	for _, j := range jobs {
		if j.Stable {
			return true
		}
	}
	return false
}

// deleteJobVersionsTxn removes every version of the job.
func deleteJobVersionsTxn(txn *memdb.Txn, index uint64, jobID string) error {
	all, err := jobVersionsTxn(txn, nil, jobID)
	if err != nil {
		return err
	}
	for _, j := range all {
		if err := txn.Delete(TableJobVersions, j); err != nil {
			return fmt.Errorf("state: delete job version %q v%d: %w", j.ID, j.Version, err)
		}
	}
	if len(all) == 0 {
		return nil
	}
	return setIndex(txn, TableJobVersions, index)
}

// JobVersionsByID returns the kept versions of the job, newest first; an
// empty list when the job is unknown.
func (s *StateStore) JobVersionsByID(ws memdb.WatchSet, jobID string) ([]*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return jobVersionsTxn(txn, ws, jobID)
}

// JobByIDAndVersion returns one kept version of the job, or nil and no
// error when it is not kept (never existed, or pruned).
func (s *StateStore) JobByIDAndVersion(ws memdb.WatchSet, jobID string, version uint64) (*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return jobVersionTxn(txn, ws, jobID, version)
}

// AllJobVersions returns every kept version of every job, by job ID then
// version (for snapshots).
func (s *StateStore) AllJobVersions(ws memdb.WatchSet) ([]*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Job](txn, ws, TableJobVersions, "id_prefix")
}

func jobVersionTxn(txn *memdb.Txn, ws memdb.WatchSet, jobID string, version uint64) (*structs.Job, error) {
	watchCh, raw, err := txn.FirstWatch(TableJobVersions, "id", jobID, version)
	if err != nil {
		return nil, fmt.Errorf("state: job version lookup %q v%d: %w", jobID, version, err)
	}
	ws.Add(watchCh)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.Job), nil
}

func jobVersionsTxn(txn *memdb.Txn, ws memdb.WatchSet, jobID string) ([]*structs.Job, error) {
	all, err := getAll[structs.Job](txn, ws, TableJobVersions, "id_prefix", jobID)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, j := range all {
		if j.ID == jobID {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Version > out[b].Version })
	return out, nil
}

// UpdateJobStability sets Stable on version of the job at Raft index
// index, in the version table and, when it is the current version, in the
// jobs table. Errors wrap structs.ErrNotFound when the job or that version
// is not stored; nothing is written then.
func (s *StateStore) UpdateJobStability(index uint64, jobID string, version uint64, stable bool) error {
	txn := s.writeTxn()
	defer txn.Abort()
	if err := updateJobStabilityTxn(txn, index, jobID, version, stable); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

func updateJobStabilityTxn(txn *memdb.Txn, index uint64, jobID string, version uint64, stable bool) error {
	v, err := jobVersionTxn(txn, nil, jobID, version)
	if err != nil {
		return err
	}
	if v == nil {
		return notFound("job version", fmt.Sprintf("%s v%d", jobID, version))
	}
	if v.Stable == stable {
		return nil
	}
	cur, err := jobByIDTxn(txn, nil, jobID)
	if err != nil {
		return err
	}
	c, err := safeCopy("job", jobID, v.Copy)
	if err != nil {
		return err
	}
	c.Stable = stable
	if cur != nil && cur.Version == version {
		// The current version: the jobs row and the version row stay the
		// same object, with the jobs row's latest ModifyIndex and status.
		c, err = safeCopy("job", jobID, cur.Copy)
		if err != nil {
			return err
		}
		c.Stable = stable
		c.ModifyIndex = index
		if err := txn.Insert(TableJobs, c); err != nil {
			return fmt.Errorf("state: update job %q: %w", jobID, err)
		}
		if err := setIndex(txn, TableJobs, index); err != nil {
			return err
		}
	}
	if err := txn.Insert(TableJobVersions, c); err != nil {
		return fmt.Errorf("state: update job version %q v%d: %w", jobID, version, err)
	}
	return setIndex(txn, TableJobVersions, index)
}

// nsDefault is ns, "default" when empty (a job stored before
// Canonicalize named it).
func nsDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}
