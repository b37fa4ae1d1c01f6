package server

import (
	"context"
	"time"
)

// leaderHoldTimeout bounds how long a follower holds a write while no
// leader is known (Nomad's RPCHoldTimeout is 7 seconds).
const leaderHoldTimeout = 5 * time.Second

// forwardedKey marks a context whose call was already forwarded once, so a
// leadership change mid-flight cannot bounce a write between servers.
type forwardedKey struct{}

// forwardTarget returns the leader to run a write on when this server is a
// follower and Config.LeaderLookup resolves the leader in-process (servertest
// clusters). It returns nil when this server leads, when there is no
// lookup, no known leader, or the call was forwarded already: the caller
// then runs the write locally, which fails with structs.ErrNotLeader on a
// follower (agents forward over HTTP in agent/http instead).
func (s *Server) forwardTarget(ctx context.Context) (*Server, context.Context) {
	if s.config.LeaderLookup == nil || s.IsLeader() || ctx.Value(forwardedKey{}) != nil {
		return nil, ctx
	}
	addr := s.Leader()
	// Right after an election a follower may not know the new leader yet:
	// hold the write a little, as Nomad's RPCHoldTimeout does, rather than
	// fail it with "no cluster leader".
	for deadline := time.Now().Add(leaderHoldTimeout); addr == "" && time.Now().Before(deadline) && ctx.Err() == nil; addr = s.Leader() {
		time.Sleep(10 * time.Millisecond)
	}
	if addr == "" {
		return nil, ctx
	}
	l := s.config.LeaderLookup(addr)
	if l == nil || l == s {
		return nil, ctx
	}
	return l, context.WithValue(ctx, forwardedKey{}, true)
}
