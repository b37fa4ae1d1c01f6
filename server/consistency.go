package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

// Read consistency, following Nomad's and Consul's contract:
//
//   - A default read (QueryOptions.AllowStale false, or nil options) is
//     answered by the leader only, after it has established leadership (its
//     barrier applied every committed entry) and confirmed with a quorum
//     that it still leads (raft.VerifyLeader). A follower forwards it
//     (in-process with Config.LeaderLookup; agent/http forwards over HTTP)
//     or fails with structs.ErrNotLeader.
//   - A stale read (AllowStale) may be answered by any server from its own
//     state, and QueryMeta says how stale (KnownLeader, LastContact). A
//     server answers stale reads only once it has caught up since it
//     started: as leader once established; as follower once its FSM has
//     applied the highest commit index a leader has sent it since start.
//     Until then it fails with structs.ErrNotReady rather than serve an
//     empty or old world.
//
// So an index a client has seen from default reads never goes backwards: it
// comes from a leader holding every committed entry.

// commitTracker wraps the Raft transport and remembers the highest commit
// index any leader has sent this server since it started (AppendEntries'
// LeaderCommitIndex, heartbeats included; an InstallSnapshot's last index).
// Raft does not expose the leader's commit index to a follower: its own
// commit index is capped at its last log index, so a follower that is
// still receiving the log would look caught up.
type commitTracker struct {
	raft.Transport
	prevote raft.WithPreVote
	out     chan raft.RPC
	seen    atomic.Uint64
	stop    chan struct{}
	once    sync.Once
}

// newCommitTracker wraps inner. It returns nil when inner cannot carry
// pre-vote requests (every Raft transport GPUlayer uses can): wrapping it
// would hide that ability from Raft.
func newCommitTracker(inner raft.Transport) *commitTracker {
	pv, ok := inner.(raft.WithPreVote)
	if !ok {
		return nil
	}
	t := &commitTracker{Transport: inner, prevote: pv, out: make(chan raft.RPC), stop: make(chan struct{})}
	go t.relay(inner.Consumer())
	return t
}

// observe records the commit index carried by one incoming RPC.
func (t *commitTracker) observe(rpc raft.RPC) {
	var idx uint64
	switch c := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		idx = c.LeaderCommitIndex
	case *raft.InstallSnapshotRequest:
		idx = c.LastLogIndex
	default:
		return
	}
	for {
		cur := t.seen.Load()
		if idx <= cur || t.seen.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// relay passes RPCs from the inner transport to Raft, observing each.
func (t *commitTracker) relay(in <-chan raft.RPC) {
	for {
		select {
		case rpc := <-in:
			t.observe(rpc)
			select {
			case t.out <- rpc:
			case <-t.stop:
				return
			}
		case <-t.stop:
			return
		}
	}
}

// Consumer implements raft.Transport.
func (t *commitTracker) Consumer() <-chan raft.RPC { return t.out }

// SetHeartbeatHandler implements raft.Transport: the network transport's
// fast path for heartbeats bypasses Consumer, so observe there too.
func (t *commitTracker) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		t.Transport.SetHeartbeatHandler(nil)
		return
	}
	t.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.observe(rpc)
		cb(rpc)
	})
}

// RequestPreVote implements raft.WithPreVote.
func (t *commitTracker) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.prevote.RequestPreVote(id, target, args, resp)
}

// Close implements raft.WithClose: it stops the relay and closes the inner
// transport when that can be closed. It is safe to call more than once.
func (t *commitTracker) Close() error {
	t.once.Do(func() { close(t.stop) })
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// markCaughtUp latches that this server's state has caught up since it
// started (called once leadership is established).
func (s *Server) markCaughtUp() { s.caughtUp.Store(true) }

// readyForStaleReads returns nil when this server may answer a stale read
// from its own state, else an error wrapping structs.ErrNotReady that says
// why. Once a server has caught up it stays ready (a stale read may lag;
// QueryMeta.LastContact says by how much).
func (s *Server) readyForStaleReads() error {
	if err := s.fsm.Halted(); err != nil {
		return fmt.Errorf("%w: state machine halted: %v", structs.ErrNotReady, err)
	}
	if s.caughtUp.Load() {
		return nil
	}
	if s.IsLeader() {
		if s.established.Load() {
			s.markCaughtUp()
			return nil
		}
		return fmt.Errorf("%w: leader not ready (its barrier has not yet applied the log)", structs.ErrNotReady)
	}
	applied := s.raft.AppliedIndex()
	if s.commits == nil {
		// No commit tracking: leader contact is the best evidence.
		if !s.raft.LastContact().IsZero() {
			s.markCaughtUp()
			return nil
		}
		return fmt.Errorf("%w: no contact with a leader since this server started", structs.ErrNotReady)
	}
	seen := s.commits.seen.Load()
	switch {
	case seen == 0:
		return fmt.Errorf("%w: no contact with a leader since this server started (applied index %d)", structs.ErrNotReady, applied)
	case applied < seen:
		return fmt.Errorf("%w: catching up with the leader: applied index %d of %d", structs.ErrNotReady, applied, seen)
	}
	// Raft counts an entry applied once it hands it to the FSM goroutine:
	// wait until the FSM has finished the last command at or below seen.
	if want := s.lastCommandAtOrBelow(seen); s.fsm.LastApplied() < want {
		return fmt.Errorf("%w: catching up with the leader: state machine at index %d of %d", structs.ErrNotReady, s.fsm.LastApplied(), want)
	}
	s.markCaughtUp()
	return nil
}

// maxCommandLookback bounds how many trailing non-command entries (no-ops,
// barriers, configuration changes) lastCommandAtOrBelow skips.
const maxCommandLookback = 256

// lastCommandAtOrBelow returns the index of the last log entry at or below
// index that Raft hands to the FSM (a command), or 0 when there is none in
// reach (compacted into a snapshot, which the FSM restored at start).
func (s *Server) lastCommandAtOrBelow(index uint64) uint64 {
	if s.raftLogs == nil {
		return 0
	}
	var l raft.Log
	for i := index; i > 0 && index-i < maxCommandLookback; i-- {
		if err := s.raftLogs.GetLog(i, &l); err != nil {
			return 0
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return 0
}

// Ready returns nil once this server may answer stale reads from its own
// state (it has caught up since it started), else an error wrapping
// structs.ErrNotReady that says why. GET /v1/status/health reports it.
func (s *Server) Ready() error { return s.readyForStaleReads() }

// staleReadyWait bounds how long a stale read waits for a server that has
// contact with a leader to catch up after it started (an entry or two
// behind is usually a millisecond away), before it is refused.
const staleReadyWait = time.Second

// waitReadyForStaleReads is readyForStaleReads, waiting up to
// staleReadyWait (or ctx) while the server has seen a leader's commit
// index and is only catching up with it; a server with no leader contact
// is refused at once.
func (s *Server) waitReadyForStaleReads(ctx context.Context) error {
	err := s.readyForStaleReads()
	if err == nil || s.commits == nil || s.commits.seen.Load() == 0 {
		return err
	}
	deadline := time.NewTimer(staleReadyWait)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return err
		case <-deadline.C:
			return err
		case <-tick.C:
			if err = s.readyForStaleReads(); err == nil {
				return nil
			}
		}
	}
}

// readyForWrites returns nil when this server is the leader and has
// established leadership; else an error wrapping structs.ErrNotLeader (a
// follower), or structs.ErrNotReady and ErrNotLeader (a leader whose
// barrier has not applied the log yet: it must not judge a write against a
// state that lags).
func (s *Server) readyForWrites() error {
	if err := s.checkLeader(); err != nil {
		return err
	}
	if !s.established.Load() {
		return fmt.Errorf("server: %w (%w): leader not ready: leadership not yet established", structs.ErrNotLeader, structs.ErrNotReady)
	}
	if err := s.fsm.Halted(); err != nil {
		return fmt.Errorf("server: %w: state machine halted: %v", structs.ErrNotReady, err)
	}
	return nil
}

// checkRead applies the read contract above before a query runs. It
// returns the server to run the query on (s, or the leader found through
// Config.LeaderLookup) with the context to use, or an error wrapping
// structs.ErrNotLeader, structs.ErrNoLeader or structs.ErrNotReady.
func (s *Server) checkRead(ctx context.Context, q *structs.QueryOptions) (*Server, context.Context, error) {
	if q != nil && q.AllowStale {
		if err := s.waitReadyForStaleReads(ctx); err != nil {
			return nil, ctx, err
		}
		return s, ctx, nil
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.checkRead(fctx, q)
	}
	if err := s.VerifyLeader(ctx); err != nil {
		return nil, ctx, err
	}
	if err := s.fsm.Halted(); err != nil {
		return nil, ctx, fmt.Errorf("%w: state machine halted: %v", structs.ErrNotReady, err)
	}
	return s, ctx, nil
}

// LastContact returns how long ago this server last heard from the
// leader: zero on the leader, -1 when it has had no contact since start.
func (s *Server) LastContact() time.Duration {
	if s.IsLeader() {
		return 0
	}
	last := s.raft.LastContact()
	if last.IsZero() {
		return -1
	}
	return time.Since(last)
}
