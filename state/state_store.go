package state

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-memdb"
)

// StateStore is the cluster state: jobs, nodes, allocations and evaluations
// in go-memdb. Reads are safe from any goroutine and see a consistent
// transaction; writes are made only by the FSM, serially.
type StateStore struct {
	db *memdb.MemDB

	// abandonCh is closed when the store is replaced by a snapshot restore,
	// waking every blocking query on it.
	abandonCh   chan struct{}
	abandonOnce *sync.Once

	// events receives the changes of every write transaction (events.go).
	events *EventBuffer
}

// StateSnapshot is a read-only point-in-time view of a StateStore, taken
// with Snapshot. Its read methods are StateStore's; its writes must not be
// called.
type StateSnapshot struct {
	StateStore
}

// NewStateStore returns an empty store. It returns an error only when the
// schema is invalid, which is a programming error.
func NewStateStore() (*StateStore, error) {
	schema, err := dbSchema()
	if err != nil {
		return nil, err
	}
	db, err := memdb.NewMemDB(schema)
	if err != nil {
		return nil, fmt.Errorf("state: create memdb: %w", err)
	}
	return &StateStore{db: db, abandonCh: make(chan struct{}), abandonOnce: new(sync.Once), events: NewEventBuffer(0)}, nil
}

// Snapshot returns a point-in-time view that later writes do not change. It
// is cheap (memdb's immutable radix trees are shared) and never fails today;
// the error is kept for future stores.
func (s *StateStore) Snapshot() (*StateSnapshot, error) {
	return &StateSnapshot{StateStore: StateStore{
		db:          s.db.Snapshot(),
		abandonCh:   s.abandonCh,
		abandonOnce: s.abandonOnce,
		events:      s.events,
	}}, nil
}

// AbandonCh returns a channel closed when the store has been replaced by a
// snapshot restore. Readers holding this store should then fetch the new
// one from the FSM.
func (s *StateStore) AbandonCh() <-chan struct{} { return s.abandonCh }

// Abandon marks the store as replaced, closing AbandonCh. It is safe to call
// more than once.
func (s *StateStore) Abandon() { s.abandonOnce.Do(func() { close(s.abandonCh) }) }

// abandoned reports whether Abandon was called.
func (s *StateStore) abandoned() bool {
	select {
	case <-s.abandonCh:
		return true
	default:
		return false
	}
}

// Index returns the Raft index at which table last changed, or 0 when it
// never has. table is one of TableJobs, TableNodes, TableAllocs, TableEvals.
func (s *StateStore) Index(table string) (uint64, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return indexTxn(txn, table)
}

func indexTxn(txn *memdb.Txn, table string) (uint64, error) {
	raw, err := txn.First(TableIndex, "id", table)
	if err != nil {
		return 0, fmt.Errorf("state: index lookup %q: %w", table, err)
	}
	if raw == nil {
		return 0, nil
	}
	return raw.(*IndexEntry).Value, nil
}

// LatestIndex returns the highest Raft index over all tables, 0 for an
// empty store.
func (s *StateStore) LatestIndex() (uint64, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	var max uint64
	for _, t := range indexedTables {
		v, err := indexTxn(txn, t)
		if err != nil {
			return 0, err
		}
		if v > max {
			max = v
		}
	}
	return max, nil
}

// setIndex records index as table's latest change inside the write txn.
// The index never moves backwards.
func setIndex(txn *memdb.Txn, table string, index uint64) error {
	cur, err := indexTxn(txn, table)
	if err != nil {
		return err
	}
	if index < cur {
		index = cur
	}
	if err := txn.Insert(TableIndex, &IndexEntry{Key: table, Value: index}); err != nil {
		return fmt.Errorf("state: update index %q: %w", table, err)
	}
	return nil
}

// QueryFn is a read run by BlockingQuery: it reads s, adds the channels to
// watch to ws, and returns its result with the Raft index that result
// reflects.
type QueryFn func(ws memdb.WatchSet, s *StateStore) (resp interface{}, index uint64, err error)

// BlockingQuery runs fn and, while the index it returns is not greater than
// minIndex, waits for a change to what fn watched and runs it again. When
// ctx ends first it returns the last result with a nil error: a timeout is a
// normal answer. When the store is abandoned (replaced by a snapshot
// restore) it returns the last result at once, so the caller can re-query
// the new store. The returned index is never below 1, so clients' loops
// progress. Errors from fn are returned as they are.
func (s *StateStore) BlockingQuery(ctx context.Context, minIndex uint64, fn QueryFn) (interface{}, uint64, error) {
	for {
		ws := memdb.NewWatchSet()
		ws.Add(s.abandonCh)
		resp, index, err := fn(ws, s)
		if err != nil {
			return nil, 0, err
		}
		if index < 1 {
			index = 1
		}
		if index > minIndex || ctx.Err() != nil || s.abandoned() {
			return resp, index, nil
		}
		if err := ws.WatchCtx(ctx); err != nil {
			// ctx ended: a timeout, not a failure.
			return resp, index, nil
		}
	}
}

// firstByID returns the object with the given ID from table, adding its
// watch channel to ws, or nil and no error when it does not exist. kind
// names the object in errors ("allocation").
func firstByID[T any](txn *memdb.Txn, ws memdb.WatchSet, table, kind, id string) (*T, error) {
	watchCh, raw, err := txn.FirstWatch(table, "id", id)
	if err != nil {
		return nil, fmt.Errorf("state: %s lookup %q: %w", kind, id, err)
	}
	ws.Add(watchCh)
	if raw == nil {
		return nil, nil
	}
	return raw.(*T), nil
}

// getAll returns the objects of table that match index and args, in the
// index's order, adding the result's watch channel to ws.
func getAll[T any](txn *memdb.Txn, ws memdb.WatchSet, table, index string, args ...interface{}) ([]*T, error) {
	it, err := txn.Get(table, index, args...)
	if err != nil {
		return nil, fmt.Errorf("state: list %s by %s: %w", table, index, err)
	}
	ws.Add(it.WatchCh())
	var out []*T
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*T))
	}
	return out, nil
}
