package server

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/gpulayer/gpulayer/structs"
)

// maxParkChans bounds the channels a QueryWait hands its caller: a
// node's watch is its row's channel (or, without a row, the table's
// part of the radix tree) and the store's abandon channel. A query whose
// watch set is larger is not parked; it blocks as before.
const maxParkChans = 3

// QueryWait is a blocking query that has found nothing new yet, for a
// caller that waits on it without a goroutine of its own (agent/http
// parks the client's connection): once any of Chans is closed, or Wait
// has passed, the same query (with the same options) answers at once or
// is worth asking again. Release must be called when the wait ends,
// whichever way.
type QueryWait struct {
	// Chans are the state's watch channels of the query, the state
	// store's abandon channel (a snapshot restore) and the leader-change
	// cut (query_leader_cut.go); at most maxParkChans+1.
	Chans []<-chan struct{}
	// Wait is the query's wait: its MaxQueryTime (default 5 minutes,
	// capped at 10) with the same jitter blockingQuery adds.
	Wait time.Duration
	// Release frees the leader-change cut.
	Release func()
}

// NodeClientAllocsWait is NodeClientAllocs up to its wait: nil when
// NodeClientAllocs with q would answer at once (q sets no index, the
// node's allocations have moved past it, or the watch is too wide to park),
// otherwise the QueryWait to wait on before asking NodeClientAllocs. It
// makes the read contract's checks (checkRead) as NodeClientAllocs does;
// their errors are NodeClientAllocs'.
func (s *Server) NodeClientAllocsWait(ctx context.Context, nodeID string, q *structs.QueryOptions) (*QueryWait, error) {
	if q == nil || q.MinQueryIndex == 0 {
		return nil, nil
	}
	srv, _, err := s.checkRead(ctx, q)
	if err != nil {
		return nil, err
	}
	// The cut first, as localQuery: a leader change after the read
	// below still ends the wait.
	cut, release := srv.queryCuts.add(context.Background())
	store := srv.fsm.State()
	ws := memdb.NewWatchSet()
	idx, err := store.NodeClientAllocsIndex(ws, nodeID, q.MinQueryIndex)
	if err != nil {
		release()
		return nil, err
	}
	if idx > q.MinQueryIndex || len(ws) > maxParkChans-1 {
		release()
		return nil, nil
	}
	wait := structs.DefaultBlockingQueryWait
	if q.MaxQueryTime > 0 {
		wait = q.MaxQueryTime
	}
	wait = min(wait, structs.MaxBlockingQueryWait)
	if j := int64(wait / 16); j > 0 {
		wait += time.Duration(rand.Int64N(j))
	}
	w := &QueryWait{Chans: make([]<-chan struct{}, 0, len(ws)+2), Wait: wait, Release: release}
	for ch := range ws {
		w.Chans = append(w.Chans, ch)
	}
	w.Chans = append(w.Chans, store.AbandonCh(), cut.Done())
	select {
	case <-store.AbandonCh():
		// Restored meanwhile: the new store may be past the index.
		release()
		return nil, nil
	default:
	}
	return w, nil
}
