package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertEvals inserts or updates evaluations at Raft index index, storing
// copies. CreateIndex is set on first insert and kept afterwards;
// ModifyIndex is index. The status of each evaluation's job is recomputed.
// Errors wrap structs.ErrInvalid for a nil evaluation or an empty ID; then
// nothing is written.
func (s *StateStore) UpsertEvals(index uint64, evals []*structs.Evaluation) error {
	txn := s.writeTxn()
	defer txn.Abort()
	jobs := map[string]struct{}{}
	if err := upsertEvalsTxn(txn, index, evals, jobs); err != nil {
		return err
	}
	if err := updateJobStatusesTxn(txn, index, jobs, false); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// upsertEvalsTxn does UpsertEvals' writes and adds each evaluation's job ID
// to jobs. It bumps the evals table index when evals is not empty.
func upsertEvalsTxn(txn *memdb.Txn, index uint64, evals []*structs.Evaluation, jobs map[string]struct{}) error {
	if len(evals) == 0 {
		return nil
	}
	for _, eval := range evals {
		if eval == nil || eval.ID == "" {
			return invalid("evaluation: nil or without ID")
		}
		e, err := safeCopy("evaluation", eval.ID, eval.Copy)
		if err != nil {
			return err
		}
		existing, err := evalByIDTxn(txn, nil, eval.ID)
		if err != nil {
			return err
		}
		e.CreateIndex = index
		if existing != nil {
			e.CreateIndex = existing.CreateIndex
		}
		e.ModifyIndex = index
		if err := txn.Insert(TableEvals, e); err != nil {
			return fmt.Errorf("state: insert evaluation %q: %w", e.ID, err)
		}
		if e.JobID != "" {
			jobs[e.JobID] = struct{}{}
		}
	}
	return setIndex(txn, TableEvals, index)
}

// DeleteEvals removes the named evaluations and allocations (garbage
// collection). IDs that do not exist are skipped. The statuses of the
// affected jobs are recomputed; a job left with no evaluation and no
// allocation is "dead", not "pending" (see jobStatusTxn).
func (s *StateStore) DeleteEvals(index uint64, evalIDs, allocIDs []string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	jobs := map[string]struct{}{}
	nodes := map[string]bool{}
	for _, id := range evalIDs {
		e, err := evalByIDTxn(txn, nil, id)
		if err != nil {
			return err
		}
		if e == nil {
			continue
		}
		if err := txn.Delete(TableEvals, e); err != nil {
			return fmt.Errorf("state: delete evaluation %q: %w", id, err)
		}
		jobs[e.JobID] = struct{}{}
	}
	for _, id := range allocIDs {
		a, err := allocByIDTxn(txn, nil, id)
		if err != nil {
			return err
		}
		if a == nil {
			continue
		}
		if err := txn.Delete(TableAllocs, a); err != nil {
			return fmt.Errorf("state: delete allocation %q: %w", id, err)
		}
		nodes[a.NodeID] = true
		if err := deleteServicesByTxn(txn, index, "alloc", a.ID); err != nil {
			return err
		}
		jobs[a.JobID] = struct{}{}
	}
	if len(evalIDs) > 0 {
		if err := setIndex(txn, TableEvals, index); err != nil {
			return err
		}
	}
	if len(allocIDs) > 0 {
		if err := setIndex(txn, TableAllocs, index); err != nil {
			return err
		}
	}
	if err := nodeAllocsChangedTxn(txn, index, nodes); err != nil {
		return err
	}
	if err := updateJobStatusesTxn(txn, index, jobs, true); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// Evals returns every evaluation, sorted by ID.
func (s *StateStore) Evals(ws memdb.WatchSet) ([]*structs.Evaluation, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Evaluation](txn, ws, TableEvals, "id")
}

// EvalByID returns the evaluation, or nil and no error when it does not
// exist.
func (s *StateStore) EvalByID(ws memdb.WatchSet, id string) (*structs.Evaluation, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return evalByIDTxn(txn, ws, id)
}

// EvalsByJob returns the job's evaluations, sorted by ID.
func (s *StateStore) EvalsByJob(ws memdb.WatchSet, jobID string) ([]*structs.Evaluation, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return evalsByJobTxn(txn, ws, jobID)
}

func evalByIDTxn(txn *memdb.Txn, ws memdb.WatchSet, id string) (*structs.Evaluation, error) {
	return firstByID[structs.Evaluation](txn, ws, TableEvals, "evaluation", id)
}

func evalsByJobTxn(txn *memdb.Txn, ws memdb.WatchSet, jobID string) ([]*structs.Evaluation, error) {
	if jobID == "" {
		return nil, nil
	}
	return getAll[structs.Evaluation](txn, ws, TableEvals, "job", jobID)
}
