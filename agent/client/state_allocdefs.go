package client

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/gpulayer/gpulayer/structs"
)

// allocDefsBucket holds, keyed by ID, every allocation this client runs
// as the servers last sent it (JSON, job included), from the moment its
// runner is made until it finishes or the servers drop it. A client that
// restarts while no server answers rebuilds its runners from it
// (restoreAllocs): tasks are reattached, endpoint routers serve their
// members again, before and regardless of registration.
var allocDefsBucket = []byte("alloc_defs")

// maxAllocDefBytes bounds one stored allocation: a larger record is a
// corrupt file, not an allocation (jobs are bounded far below by the
// servers' request limits).
const maxAllocDefBytes = 64 << 20

// putAllocDefs records the allocations in one transaction (one fsync for
// every runner an alloc watch result starts).
func (s *stateDB) putAllocDefs(allocs []*structs.Allocation) error {
	if len(allocs) == 0 {
		return nil
	}
	enc := make([][]byte, len(allocs))
	for i, a := range allocs {
		b, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode alloc %s: %w", a.ID, err)
		}
		enc[i] = b
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(allocDefsBucket)
		if err != nil {
			return err
		}
		for i, a := range allocs {
			if err := bk.Put([]byte(a.ID), enc[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// allocDefs returns every recorded allocation. A record that does not
// decode, is too large or whose key is not its ID is an error: the file
// is corrupt.
func (s *stateDB) allocDefs() ([]*structs.Allocation, error) {
	var out []*structs.Allocation
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(allocDefsBucket)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			if len(v) > maxAllocDefBytes {
				return fmt.Errorf("decode alloc %q: %d bytes, more than %d", k, len(v), maxAllocDefBytes)
			}
			var a structs.Allocation
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode alloc %q: %w", k, err)
			}
			if a.ID != string(k) || !pathElem(a.ID) {
				return fmt.Errorf("decode alloc %q: record holds allocation %q", k, a.ID)
			}
			out = append(out, &a)
			return nil
		})
	})
	return out, err
}

// deleteAllocDef forgets a recorded allocation.
func (s *stateDB) deleteAllocDef(allocID string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return deleteAllocDefTx(tx, allocID) })
}

// deleteAllocDefTx deletes a recorded allocation within tx.
func deleteAllocDefTx(tx *bolt.Tx, allocID string) error {
	bk := tx.Bucket(allocDefsBucket)
	if bk == nil {
		return nil
	}
	return bk.Delete([]byte(allocID))
}
