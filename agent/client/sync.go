package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/structs"
)

// maxSyncRetry caps the wait between resends of status updates the servers
// refused: long enough that a fleet of clients does not hammer servers
// that are electing a leader, short enough that a task's exit reaches the
// new leader within a few seconds of its election.
const maxSyncRetry = 2 * time.Second

// allocSyncer sends allocation status updates to the servers as soon as
// they happen. It keeps the latest update per allocation; while a send is
// in flight, updates that arrive pile up and go together in the next one
// (no fixed tick), so a quiet client sends at once and a busy one sends
// batches as large as the servers' latency makes them. A batch the servers
// refuse stays queued and is resent after a backoff that starts at retry
// and doubles (with jitter) up to maxSyncRetry, until the servers take it.
type allocSyncer struct {
	servers ServerConn
	logger  hclog.Logger
	retry   time.Duration

	mu      sync.Mutex
	pending map[string]*structs.Allocation
	kick    chan struct{}
}

func newAllocSyncer(servers ServerConn, logger hclog.Logger, retry time.Duration) *allocSyncer {
	return &allocSyncer{servers: servers, logger: logger.Named("alloc_sync"), retry: retry, pending: map[string]*structs.Allocation{}, kick: make(chan struct{}, 1)}
}

// enqueue replaces any queued update for the same allocation and wakes the
// sender.
func (s *allocSyncer) enqueue(a *structs.Allocation) {
	s.mu.Lock()
	s.pending[a.ID] = a
	s.mu.Unlock()
	s.wake()
}

func (s *allocSyncer) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run sends queued updates until ctx is done.
func (s *allocSyncer) run(ctx context.Context) {
	backoff := s.retry
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		err := s.flush(ctx)
		if err == nil {
			backoff = s.retry
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := jittered(backoff)
		s.logger.Warn("update allocations failed; will retry", "error", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, maxSyncRetry)
		s.wake()
	}
}

// flush sends everything queued. Updates that fail stay queued unless a
// newer one arrived meanwhile. Updates for allocations the servers no
// longer know (structs.ErrNotFound) are dropped.
func (s *allocSyncer) flush(ctx context.Context) error {
	s.mu.Lock()
	batch := make([]*structs.Allocation, 0, len(s.pending))
	for _, a := range s.pending {
		batch = append(batch, a)
	}
	s.pending = map[string]*structs.Allocation{}
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := s.servers.UpdateAllocs(ctx, batch)
	if err == nil {
		return nil
	}
	if errors.Is(err, structs.ErrNotFound) && len(batch) > 1 {
		// Find the unknown ones by sending one at a time.
		var firstErr error
		for _, a := range batch {
			if err := s.servers.UpdateAllocs(ctx, []*structs.Allocation{a}); err != nil && !errors.Is(err, structs.ErrNotFound) {
				s.requeue(a)
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		return firstErr
	}
	if errors.Is(err, structs.ErrNotFound) {
		return nil
	}
	for _, a := range batch {
		s.requeue(a)
	}
	return err
}

// jittered returns a wait in [d/2, d]: clients refused by the same
// election do not come back in step.
func jittered(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func (s *allocSyncer) requeue(a *structs.Allocation) {
	s.mu.Lock()
	if _, newer := s.pending[a.ID]; !newer {
		s.pending[a.ID] = a
	}
	s.mu.Unlock()
}
