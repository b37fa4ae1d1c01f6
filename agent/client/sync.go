package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/structs"
)

// allocSyncer batches allocation status updates to the servers: it keeps
// the latest update per allocation and sends them every interval, keeping
// failed batches for the next round.
type allocSyncer struct {
	servers  ServerConn
	logger   hclog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[string]*structs.Allocation
	kick    chan struct{}
}

func newAllocSyncer(servers ServerConn, logger hclog.Logger, interval time.Duration) *allocSyncer {
	return &allocSyncer{servers: servers, logger: logger.Named("alloc_sync"), interval: interval, pending: map[string]*structs.Allocation{}, kick: make(chan struct{}, 1)}
}

// enqueue replaces any queued update for the same allocation.
func (s *allocSyncer) enqueue(a *structs.Allocation) {
	s.mu.Lock()
	s.pending[a.ID] = a
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run sends batches until ctx is done.
func (s *allocSyncer) run(ctx context.Context) {
	backoff := s.interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		// Let more updates pile up into one batch.
		t := time.NewTimer(s.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.flush(ctx); err != nil {
			s.logger.Warn("update allocations failed; will retry", "error", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, 10*time.Second)
			select {
			case s.kick <- struct{}{}:
			default:
			}
			continue
		}
		backoff = s.interval
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

func (s *allocSyncer) requeue(a *structs.Allocation) {
	s.mu.Lock()
	if _, newer := s.pending[a.ID]; !newer {
		s.pending[a.ID] = a
	}
	s.mu.Unlock()
}
