package server

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// blockingQuery runs fn against the current state store of the server
// the read contract picks (consistency.go): with default options the
// leader, after confirming its leadership; with q.AllowStale this server,
// once it has caught up since it started. It returns an error wrapping
// structs.ErrNotLeader, ErrNoLeader or ErrNotReady when no server may
// answer. With
// q.MinQueryIndex zero it answers at once; otherwise it waits until fn's
// index exceeds MinQueryIndex or MaxQueryTime passes (default 5 minutes,
// capped at 10, plus a random jitter of up to 1/16 of the wait, as Nomad's
// nomad/rpc.go blockingRPC does so that many waiting clients do not all
// return at once). A timeout is a normal answer with the current result;
// so is the end of the wait at a leader change (query_leader_cut.go).
// When a snapshot restore replaces the store mid-wait, the query moves to
// the new store.
func (s *Server) blockingQuery(ctx context.Context, q *structs.QueryOptions, fn state.QueryFn) (interface{}, structs.QueryMeta, error) {
	srv, ctx, err := s.checkRead(ctx, q)
	if err != nil {
		return nil, structs.QueryMeta{}, err
	}
	return srv.localQuery(ctx, q, fn)
}

// localQuery runs the blocking query against this server's own state store,
// after checkRead has allowed it.
func (s *Server) localQuery(ctx context.Context, q *structs.QueryOptions, fn state.QueryFn) (interface{}, structs.QueryMeta, error) {
	var minIndex uint64
	if q != nil {
		minIndex = q.MinQueryIndex
	}
	if minIndex > 0 {
		wait := structs.DefaultBlockingQueryWait
		if q.MaxQueryTime > 0 {
			wait = q.MaxQueryTime
		}
		if wait > structs.MaxBlockingQueryWait {
			wait = structs.MaxBlockingQueryWait
		}
		if j := int64(wait / 16); j > 0 {
			wait += time.Duration(rand.Int64N(j))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		// A leader change ends the wait too (query_leader_cut.go): a
		// follower that lost the leader must not hold its clients.
		var release func()
		ctx, release = s.queryCuts.add(ctx)
		defer release()
	}
	for {
		store := s.fsm.State()
		resp, index, err := store.BlockingQuery(ctx, minIndex, fn)
		if err != nil {
			return nil, structs.QueryMeta{}, err
		}
		select {
		case <-store.AbandonCh():
			if ctx.Err() == nil && index <= minIndex {
				continue
			}
		default:
		}
		return resp, s.queryMeta(index), nil
	}
}

// queryMeta fills the QueryMeta for a read at index.
func (s *Server) queryMeta(index uint64) structs.QueryMeta {
	m := structs.QueryMeta{Index: index, KnownLeader: s.raft.Leader() != ""}
	if !s.IsLeader() {
		if last := s.raft.LastContact(); !last.IsZero() {
			m.LastContact = time.Since(last)
		}
	}
	return m
}

// maxModifyIndex returns the highest ModifyIndex of allocs, at least 1.
func maxAllocModifyIndex(allocs []*structs.Allocation) uint64 {
	var idx uint64 = 1
	for _, a := range allocs {
		if a.ModifyIndex > idx {
			idx = a.ModifyIndex
		}
	}
	return idx
}
