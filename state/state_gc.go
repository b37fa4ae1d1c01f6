package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// AllocsByEval returns the allocations whose EvalID is evalID, sorted by
// ID. It reads the evaluation's job's allocations (an evaluation places
// only its job's), or every allocation once the evaluation is gone: the
// allocations table keeps no index on EvalID, which cost memory and a
// write at every allocation update for this rare read.
func (s *StateStore) AllocsByEval(ws memdb.WatchSet, evalID string) ([]*structs.Allocation, error) {
	if evalID == "" {
		return nil, nil
	}
	txn := s.db.Txn(false)
	defer txn.Abort()
	ev, err := evalByIDTxn(txn, ws, evalID)
	if err != nil {
		return nil, err
	}
	var all []*structs.Allocation
	if ev != nil && ev.JobID != "" {
		all, err = allocsByJobTxn(txn, ws, ev.JobID)
	} else {
		all, err = getAll[structs.Allocation](txn, ws, TableAllocs, "id")
	}
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, a := range all {
		if a.EvalID == evalID {
			out = append(out, a)
		}
	}
	return out, nil
}

// PurgeGC applies a garbage-collection purge at Raft index index in one
// transaction:
//   - each job of req.Jobs whose stored ModifyIndex still equals the
//     entry's is deleted with the evaluations and allocations the entry
//     lists (IDs that no longer exist, or that belong to another job, are
//     skipped); a job that is missing
//     or changed since keeps everything the entry lists;
//   - each node of req.Nodes whose stored ModifyIndex still equals the
//     entry's is deleted; a missing or changed node is left alone.
//
// The jobs, evals, allocs and nodes table indexes are bumped only when
// something of theirs was deleted. Skipped entries are not errors: the
// leader decided on an older snapshot, and the next collection decides
// again. Errors wrap structs.ErrInvalid for a nil request or a nil entry or
// one without an ID; then nothing is written.
func (s *StateStore) PurgeGC(index uint64, req *structs.GCPurgeRequest) error {
	if req == nil {
		return invalid("gc purge: nil request")
	}
	for _, j := range req.Jobs {
		if j == nil || j.JobID == "" {
			return invalid("gc purge: job entry nil or without ID")
		}
	}
	for _, n := range req.Nodes {
		if n == nil || n.NodeID == "" {
			return invalid("gc purge: node entry nil or without ID")
		}
	}
	txn := s.writeTxn()
	defer txn.Abort()
	changed := map[string]bool{}
	// nodes holds the nodes whose allocations were removed, or that were.
	nodes := map[string]bool{}
	for _, j := range req.Jobs {
		job, err := jobByIDTxn(txn, nil, j.JobID)
		if err != nil {
			return err
		}
		if job == nil || job.ModifyIndex != j.ModifyIndex {
			continue
		}
		if err := txn.Delete(TableJobs, job); err != nil {
			return fmt.Errorf("state: gc delete job %q: %w", j.JobID, err)
		}
		changed[TableJobs] = true
		if err := deleteJobVersionsTxn(txn, index, j.JobID); err != nil {
			return err
		}
		if err := deleteJobDeploymentsTxn(txn, index, j.JobID); err != nil {
			return err
		}
		// A periodic job's launch record goes with it.
		if err := deletePeriodicLaunchTxn(txn, index, j.JobID); err != nil {
			return err
		}
		for _, id := range j.Evals {
			e, err := evalByIDTxn(txn, nil, id)
			if err != nil {
				return err
			}
			if e == nil || e.JobID != j.JobID {
				continue
			}
			if err := txn.Delete(TableEvals, e); err != nil {
				return fmt.Errorf("state: gc delete evaluation %q: %w", id, err)
			}
			changed[TableEvals] = true
		}
		for _, id := range j.Allocs {
			a, err := allocByIDTxn(txn, nil, id)
			if err != nil {
				return err
			}
			if a == nil || a.JobID != j.JobID {
				continue
			}
			if err := txn.Delete(TableAllocs, a); err != nil {
				return fmt.Errorf("state: gc delete allocation %q: %w", id, err)
			}
			nodes[a.NodeID] = true
			if err := deleteServicesByTxn(txn, index, "alloc", a.ID); err != nil {
				return err
			}
			changed[TableAllocs] = true
		}
	}
	for _, n := range req.Nodes {
		node, err := nodeByIDTxn(txn, nil, n.NodeID)
		if err != nil {
			return err
		}
		if node == nil || node.ModifyIndex != n.ModifyIndex {
			continue
		}
		if err := txn.Delete(TableNodes, node); err != nil {
			return fmt.Errorf("state: gc delete node %q: %w", n.NodeID, err)
		}
		nodes[n.NodeID] = true
		changed[TableNodes] = true
	}
	if err := nodeAllocsChangedTxn(txn, index, nodes); err != nil {
		return err
	}
	for _, table := range []string{TableJobs, TableEvals, TableAllocs, TableNodes} {
		if !changed[table] {
			continue
		}
		if err := setIndex(txn, table, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}
