package client

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpulayer/gpulayer/structs"
)

// stateDB is the client's local state in <DataDir>/state.db (bbolt): the
// final status of every allocation this client finished, so a restarted
// client never runs a finished allocation again even if its last status
// update never reached the servers.
type stateDB struct {
	db *bolt.DB
}

var allocsBucket = []byte("allocs")

// allocRecord is what is kept per finished allocation.
type allocRecord struct {
	ClientStatus      string
	ClientDescription string
	TaskStates        map[string]*structs.TaskState
	// JobID and LogsPending are set while the log archive of the
	// allocation, reported finished already, is not uploaded yet: a client
	// that restarts finds it so and uploads it then (resumeLogArchives).
	JobID       string `json:",omitempty"`
	LogsPending bool   `json:",omitempty"`
}

// openState opens or creates the state file. It fails after 2 seconds if
// another client holds the file.
func openState(dataDir string) (*stateDB, error) {
	p := filepath.Join(dataDir, "state.db")
	db, err := bolt.Open(p, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open client state %s: %w", p, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(allocsBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init client state: %w", err)
	}
	return &stateDB{db: db}, nil
}

// finishAlloc records an allocation's final status and forgets its task
// handles, start and definition in one transaction: one fsync on the path from the
// last task's exit to the status report instead of three, and no state
// file in which a finished allocation still has handles to reattach to.
func (s *stateDB) finishAlloc(allocID string, rec *allocRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode alloc %s state: %w", allocID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(allocsBucket).Put([]byte(allocID), b); err != nil {
			return err
		}
		if err := deleteHandlesTx(tx, allocID); err != nil {
			return err
		}
		if err := deleteAllocDefTx(tx, allocID); err != nil {
			return err
		}
		return deleteAllocStartTx(tx, allocID)
	})
}

// terminal returns every recorded finished allocation by ID.
func (s *stateDB) terminal() (map[string]*allocRecord, error) {
	out := map[string]*allocRecord{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(allocsBucket).ForEach(func(k, v []byte) error {
			var rec allocRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("decode alloc %s state: %w", k, err)
			}
			out[string(k)] = &rec
			return nil
		})
	})
	return out, err
}

// deleteAlloc forgets an allocation the servers no longer list.
func (s *stateDB) deleteAlloc(allocID string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(allocsBucket).Delete([]byte(allocID))
	})
}

func (s *stateDB) close() error { return s.db.Close() }
