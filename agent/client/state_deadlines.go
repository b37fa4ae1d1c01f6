package client

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// allocStartsBucket holds, per allocation with a max_run_duration, when
// it started on this client: 8 bytes, big-endian Unix nanoseconds, keyed
// by allocation ID. A restarted client (reattaching to its tasks, or
// starting them again after a clean shutdown) measures the deadline from
// this time, so neither a restart of the client nor of a task moves it.
var allocStartsBucket = []byte("alloc_starts")

// putAllocStart records that the allocation started at startNanos (Unix
// nanoseconds).
func (s *stateDB) putAllocStart(allocID string, startNanos int64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(startNanos))
	return s.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(allocStartsBucket)
		if err != nil {
			return err
		}
		return bk.Put([]byte(allocID), v[:])
	})
}

// allocStarts returns every recorded start, in Unix nanoseconds, by
// allocation ID. A malformed record is an error: the file is corrupt.
func (s *stateDB) allocStarts() (map[string]int64, error) {
	out := map[string]int64{}
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(allocStartsBucket)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("decode start of alloc %s: %d bytes, want 8", k, len(v))
			}
			out[string(k)] = int64(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	return out, err
}

// deleteAllocStart forgets the allocation's start (it finished, or is no
// longer on this node).
func (s *stateDB) deleteAllocStart(allocID string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return deleteAllocStartTx(tx, allocID) })
}

// deleteAllocStartTx deletes the allocation's start within tx.
func deleteAllocStartTx(tx *bolt.Tx, allocID string) error {
	bk := tx.Bucket(allocStartsBucket)
	if bk == nil {
		return nil
	}
	return bk.Delete([]byte(allocID))
}
