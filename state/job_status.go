package state

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// jobStatusTxn derives a job's status from its allocations and evaluations
// in the write transaction, in this order (an adaptation of Nomad's
// nomad/state/state_store.go getJobStatus):
//
//  1. A stopped job (Stop) is "dead" once none of its allocations holds
//     resources (Allocation.HoldsResources), and "running" until then,
//     because its processes may still run.
//  2. Any allocation not terminal (Allocation.TerminalStatus) → "running".
//  3. Any evaluation pending or blocked → "pending".
//  4. A job with allocations or evaluations, all terminal → "dead": a
//     batch job whose work finished, a service job whose allocations all
//     ended with no replacement coming, or a job scaled to count = 0
//     once its evaluation completed (Nomad's rule).
//  5. A job left with no allocation and no evaluation because garbage
//     collection just deleted some of them (evalDelete, Nomad's flag of
//     the same name, set by DeleteEvals) → "dead": only terminal
//     evaluations and finished allocations are collected, so nothing is
//     coming. Without it a count = 0 job went back from "dead" to
//     "pending" once collected.
//  6. Otherwise (a job just registered, with no evaluation yet)
//     → "pending".
//
// A periodic or parameterized parent, which never has allocations of its
// own, is "running" until stopped and then "dead" (Nomad's rule).
func jobStatusTxn(txn *memdb.Txn, job *structs.Job, evalDelete bool) (string, error) {
	if job.IsParent() {
		if job.Stop {
			return structs.JobStatusDead, nil
		}
		return structs.JobStatusRunning, nil
	}
	allocs, err := allocsByJobTxn(txn, nil, job.ID)
	if err != nil {
		return "", err
	}
	if job.Stop {
		for _, a := range allocs {
			if a.HoldsResources() {
				return structs.JobStatusRunning, nil
			}
		}
		return structs.JobStatusDead, nil
	}
	for _, a := range allocs {
		if !a.TerminalStatus() {
			return structs.JobStatusRunning, nil
		}
	}
	evals, err := evalsByJobTxn(txn, nil, job.ID)
	if err != nil {
		return "", err
	}
	for _, e := range evals {
		if e.Status == structs.EvalStatusPending || e.Status == structs.EvalStatusBlocked {
			return structs.JobStatusPending, nil
		}
	}
	if len(allocs) > 0 || len(evals) > 0 || evalDelete {
		return structs.JobStatusDead, nil
	}
	return structs.JobStatusPending, nil
}

// updateJobStatusesTxn recomputes the status of each named job that exists
// and, where it changed, upserts a copy with the new Status and
// ModifyIndex = index, bumping the jobs table index. evalDelete is true
// when the transaction deletes evaluations and allocations (garbage
// collection; see jobStatusTxn). Job IDs are visited in sorted order so the result is
// deterministic.
func updateJobStatusesTxn(txn *memdb.Txn, index uint64, jobIDs map[string]struct{}, evalDelete bool) error {
	ids := make([]string, 0, len(jobIDs))
	for id := range jobIDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	changed := false
	for _, id := range ids {
		job, err := jobByIDTxn(txn, nil, id)
		if err != nil {
			return err
		}
		if job == nil {
			continue
		}
		status, err := jobStatusTxn(txn, job, evalDelete)
		if err != nil {
			return err
		}
		if status == job.Status {
			continue
		}
		j, err := safeCopy("job", id, job.Copy)
		if err != nil {
			return err
		}
		j.Status = status
		j.ModifyIndex = index
		if err := txn.Insert(TableJobs, j); err != nil {
			return fmt.Errorf("state: update job %q status: %w", id, err)
		}
		changed = true
	}
	if changed {
		return setIndex(txn, TableJobs, index)
	}
	return nil
}
