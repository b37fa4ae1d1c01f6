package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// StateRestore loads a snapshot into a store in one write transaction.
// Objects are inserted as given (no copies, no index or status changes):
// they come from a snapshot and are owned by the store from then on.
// Nothing is visible until Commit; Abort discards everything.
type StateRestore struct {
	txn *memdb.Txn
}

// Restore starts a restore. It is meant for a new, empty store that no one
// reads yet; the write transaction holds the store's write lock until
// Commit or Abort.
func (s *StateStore) Restore() (*StateRestore, error) {
	return &StateRestore{txn: s.db.Txn(true)}, nil
}

// JobRestore inserts a job. Errors wrap structs.ErrInvalid for a nil job or
// an empty ID.
func (r *StateRestore) JobRestore(job *structs.Job) error {
	if job == nil || job.ID == "" {
		return invalid("restore job: nil or without ID")
	}
	return r.insert(TableJobs, job.ID, job)
}

// JobVersionRestore inserts a kept job version. Errors wrap
// structs.ErrInvalid for a nil job or an empty ID.
func (r *StateRestore) JobVersionRestore(job *structs.Job) error {
	if job == nil || job.ID == "" {
		return invalid("restore job version: nil or without ID")
	}
	return r.insert(TableJobVersions, job.ID, job)
}

// NodeRestore inserts a node. Errors wrap structs.ErrInvalid for a nil node
// or an empty ID.
func (r *StateRestore) NodeRestore(node *structs.Node) error {
	if node == nil || node.ID == "" {
		return invalid("restore node: nil or without ID")
	}
	return r.insert(TableNodes, node.ID, node)
}

// AllocRestore inserts an allocation. Errors wrap structs.ErrInvalid for a
// nil allocation or an empty ID. The restore owns alloc: its strings are
// interned and its task states replaced by a compact copy, as an
// allocation the FSM stores from its Raft entries (compactPlacedAlloc,
// storedTaskStates), so a restored server holds no more than one that
// applied the log.
func (r *StateRestore) AllocRestore(alloc *structs.Allocation) error {
	if alloc == nil || alloc.ID == "" {
		return invalid("restore allocation: nil or without ID")
	}
	compactPlacedAlloc(alloc)
	alloc.TaskStates = storedTaskStates(alloc.TaskStates)
	return r.insert(TableAllocs, alloc.ID, alloc)
}

// EvalRestore inserts an evaluation. Errors wrap structs.ErrInvalid for a
// nil evaluation or an empty ID.
func (r *StateRestore) EvalRestore(eval *structs.Evaluation) error {
	if eval == nil || eval.ID == "" {
		return invalid("restore evaluation: nil or without ID")
	}
	return r.insert(TableEvals, eval.ID, eval)
}

// IndexRestore sets table's index row. An index of 0 writes nothing: it
// means the table never changed, like a missing row. Errors wrap structs.ErrInvalid for a
// table that is not one of TableJobs, TableNodes, TableAllocs, TableEvals.
func (r *StateRestore) IndexRestore(table string, index uint64) error {
	known := false
	for _, t := range indexedTables {
		known = known || t == table
	}
	if !known {
		return invalid("restore index: unknown table %q", table)
	}
	if index == 0 {
		return nil
	}
	return r.insert(TableIndex, table, &IndexEntry{Key: table, Value: index})
}

func (r *StateRestore) insert(table, id string, obj interface{}) error {
	if err := r.txn.Insert(table, obj); err != nil {
		return fmt.Errorf("state: restore %s %q: %w", table, id, err)
	}
	return nil
}

// Commit rebuilds the derived tables (TableNodeAllocChanges) and makes
// the restored objects visible. It fails only when the rebuild does.
func (r *StateRestore) Commit() error {
	if err := rebuildNodeAllocChanges(r.txn); err != nil {
		return err
	}
	r.txn.Commit()
	return nil
}

// Abort discards the restore. It is safe after Commit (then a no-op).
func (r *StateRestore) Abort() { r.txn.Abort() }
