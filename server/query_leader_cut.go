package server

import (
	"context"
	"sync"

	"github.com/hashicorp/raft"
)

// queryCuts ends this server's blocking queries when its view of the
// leader changes (a Raft LeaderObservation: a new leader, or none once a
// follower stops hearing from one). Clients wait up to 5 minutes on a
// blocking query, most of them stale reads a follower answers from its own
// state; a follower cut off from the leader would otherwise hold them for
// the whole wait while the rest of the cluster moves on. Cut, a query
// answers what it has, with KnownLeader false when no leader is known, and
// the client asks again (elsewhere when no leader is known,
// agent/client's HTTPServerConn).
type queryCuts struct {
	mu   sync.Mutex
	next uint64
	live map[uint64]context.CancelFunc
}

// add returns ctx, ended at the next leader change too, and the function
// that releases it.
func (c *queryCuts) add(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	if c.live == nil {
		c.live = map[uint64]context.CancelFunc{}
	}
	c.next++
	id := c.next
	c.live[id] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.live, id)
		c.mu.Unlock()
		cancel()
	}
}

// cutAll ends every blocking query now waiting.
func (c *queryCuts) cutAll() {
	c.mu.Lock()
	live := c.live
	c.live = nil
	c.mu.Unlock()
	for _, cancel := range live {
		cancel()
	}
}

// watchLeaderForQueries cuts the blocking queries at each leader change r
// reports until done closes.
func (s *Server) watchLeaderForQueries(r *raft.Raft, done <-chan struct{}) {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(obs)
	go func() {
		defer r.DeregisterObserver(obs)
		for {
			select {
			case <-done:
				return
			case <-ch:
				s.queryCuts.cutAll()
			}
		}
	}()
}
