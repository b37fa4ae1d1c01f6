package state

import (
	"fmt"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// ProvisionRequests returns every provision request, sorted by ID.
func (s *StateStore) ProvisionRequests(ws memdb.WatchSet) ([]*structs.ProvisionRequest, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.ProvisionRequest](txn, ws, TableProvisionRequests, "id")
}

// ProvisionRequestsByPool returns the pool's provision requests, oldest
// (lowest CreateIndex) first.
func (s *StateStore) ProvisionRequestsByPool(ws memdb.WatchSet, pool string) ([]*structs.ProvisionRequest, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	out, err := getAll[structs.ProvisionRequest](txn, ws, TableProvisionRequests, "pool", pool)
	if err != nil {
		return nil, err
	}
	sortProvisionRequests(out)
	return out, nil
}

// ProvisionRequestsByStatus returns the requests in status, oldest first.
func (s *StateStore) ProvisionRequestsByStatus(ws memdb.WatchSet, status string) ([]*structs.ProvisionRequest, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	out, err := getAll[structs.ProvisionRequest](txn, ws, TableProvisionRequests, "status", status)
	if err != nil {
		return nil, err
	}
	sortProvisionRequests(out)
	return out, nil
}

// ProvisionRequestByID returns the request, or nil and no error when it
// does not exist.
func (s *StateStore) ProvisionRequestByID(ws memdb.WatchSet, id string) (*structs.ProvisionRequest, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.ProvisionRequest](txn, ws, TableProvisionRequests, "provision request", id)
}

func sortProvisionRequests(rs []*structs.ProvisionRequest) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].CreateIndex != rs[j].CreateIndex {
			return rs[i].CreateIndex < rs[j].CreateIndex
		}
		return rs[i].ID < rs[j].ID
	})
}

// UpsertProvisionRequests stores copies of reqs at index in one
// transaction: all or none. A new request gets CreateIndex index; an
// existing one keeps its CreateIndex and CreateTime. Errors wrap
// structs.ErrInvalid for a nil or invalid request, or more than
// structs.MaxProvisionRequestsPerEntry.
func (s *StateStore) UpsertProvisionRequests(index uint64, reqs []*structs.ProvisionRequest) error {
	if len(reqs) > structs.MaxProvisionRequestsPerEntry {
		return invalid("provision requests: %d in one entry, at most %d", len(reqs), structs.MaxProvisionRequestsPerEntry)
	}
	for _, r := range reqs {
		if r == nil {
			return invalid("provision request: nil")
		}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("provision request %q: %w", r.ID, err)
		}
	}
	txn := s.writeTxn()
	defer txn.Abort()
	for _, r := range reqs {
		existing, err := firstByID[structs.ProvisionRequest](txn, nil, TableProvisionRequests, "provision request", r.ID)
		if err != nil {
			return err
		}
		c := r.Copy()
		c.CreateIndex, c.ModifyIndex = index, index
		if existing != nil {
			c.CreateIndex, c.CreateTime = existing.CreateIndex, existing.CreateTime
		}
		if err := txn.Insert(TableProvisionRequests, c); err != nil {
			return fmt.Errorf("state: insert provision request %q: %w", c.ID, err)
		}
	}
	if len(reqs) > 0 {
		if err := setIndex(txn, TableProvisionRequests, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// ApplyProvisionResult applies a provider answer at index when, and only
// when, the stored request's ModifyIndex equals res.ExpectedIndex (a
// compare-and-set). It returns whether it applied: false, with no error,
// for a stale answer or an unknown request (GC'd meanwhile). Errors wrap
// structs.ErrInvalid for an invalid result.
func (s *StateStore) ApplyProvisionResult(index uint64, res *structs.ProvisionResultRequest) (bool, error) {
	if res == nil {
		return false, invalid("provision result: nil")
	}
	if err := res.Validate(); err != nil {
		return false, fmt.Errorf("provision result %q: %w", res.ID, err)
	}
	txn := s.writeTxn()
	defer txn.Abort()
	existing, err := firstByID[structs.ProvisionRequest](txn, nil, TableProvisionRequests, "provision request", res.ID)
	if err != nil {
		return false, err
	}
	if existing == nil || existing.ModifyIndex != res.ExpectedIndex {
		return false, nil
	}
	c := existing.Copy()
	c.Status, c.Error, c.Attempts, c.NextAttempt = res.Status, res.Error, res.Attempts, res.NextAttempt
	if res.HostID != "" {
		c.HostID = res.HostID
	}
	if res.UpdatedAt != 0 {
		c.ModifyTime = res.UpdatedAt
	}
	c.ModifyIndex = index
	if err := txn.Insert(TableProvisionRequests, c); err != nil {
		return false, fmt.Errorf("state: insert provision request %q: %w", c.ID, err)
	}
	if err := setIndex(txn, TableProvisionRequests, index); err != nil {
		return false, err
	}
	s.commitTxn(txn, index)
	return true, nil
}

// DeleteProvisionRequests removes the requests with the given IDs;
// unknown IDs are skipped.
func (s *StateStore) DeleteProvisionRequests(index uint64, ids []string) error {
	if len(ids) > structs.MaxProvisionRequestsPerEntry {
		return invalid("provision request delete: %d IDs in one entry, at most %d", len(ids), structs.MaxProvisionRequestsPerEntry)
	}
	txn := s.writeTxn()
	defer txn.Abort()
	touched := false
	for _, id := range ids {
		r, err := firstByID[structs.ProvisionRequest](txn, nil, TableProvisionRequests, "provision request", id)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		if err := txn.Delete(TableProvisionRequests, r); err != nil {
			return fmt.Errorf("state: delete provision request %q: %w", id, err)
		}
		touched = true
	}
	if touched {
		if err := setIndex(txn, TableProvisionRequests, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// ProvisionRequestRestore inserts a request from a snapshot. Errors wrap
// structs.ErrInvalid for a nil request or an empty ID.
func (r *StateRestore) ProvisionRequestRestore(req *structs.ProvisionRequest) error {
	if req == nil || req.ID == "" {
		return invalid("restore provision request: nil or without ID")
	}
	return r.insert(TableProvisionRequests, req.ID, req)
}
