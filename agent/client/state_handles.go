package client

import (
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// handlesBucket holds a driver handle per running task, keyed
// "<alloc-id>/<task>": what a restarted client needs to find the task
// again (a process by pid and start time, a container by ID) instead of
// starting it a second time.
var handlesBucket = []byte("task_handles")

// putHandle records the handle of a task that just started, replacing the
// one of an earlier run of the same task.
func (s *stateDB) putHandle(allocID, task string, h *driver.TaskHandle) error {
	return s.putHandleAndDef(allocID, task, h, nil)
}

// putHandleAndDef records a started task's handle and, when def is not
// nil, the allocation's restore record (state_allocdefs.go) with the
// task's history, in one transaction: one fsync on the path from a task's
// start to the handling of its exit instead of two, and a restarted
// client finds both or neither.
func (s *stateDB) putHandleAndDef(allocID, task string, h *driver.TaskHandle, def *structs.Allocation) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode task handle %s/%s: %w", allocID, task, err)
	}
	var d []byte
	if def != nil {
		if d, err = json.Marshal(def); err != nil {
			return fmt.Errorf("encode alloc %s: %w", def.ID, err)
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(handlesBucket)
		if err != nil {
			return err
		}
		if err := bk.Put([]byte(allocID+"/"+task), b); err != nil {
			return err
		}
		if d == nil {
			return nil
		}
		dk, err := tx.CreateBucketIfNotExists(allocDefsBucket)
		if err != nil {
			return err
		}
		return dk.Put([]byte(def.ID), d)
	})
}

// handles returns every recorded task handle by allocation ID, then task
// name.
func (s *stateDB) handles() (map[string]map[string]*driver.TaskHandle, error) {
	out := map[string]map[string]*driver.TaskHandle{}
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(handlesBucket)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			allocID, task, ok := strings.Cut(string(k), "/")
			if !ok {
				return nil
			}
			var h driver.TaskHandle
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("decode task handle %s: %w", k, err)
			}
			if out[allocID] == nil {
				out[allocID] = map[string]*driver.TaskHandle{}
			}
			out[allocID][task] = &h
			return nil
		})
	})
	return out, err
}

// deleteHandles forgets the task handles of an allocation.
func (s *stateDB) deleteHandles(allocID string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return deleteHandlesTx(tx, allocID) })
}

// deleteHandlesTx deletes the task handles of an allocation within tx.
func deleteHandlesTx(tx *bolt.Tx, allocID string) error {
	bk := tx.Bucket(handlesBucket)
	if bk == nil {
		return nil
	}
	prefix := []byte(allocID + "/")
	c := bk.Cursor()
	var keys [][]byte
	for k, _ := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
