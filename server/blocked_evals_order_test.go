package server

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// orderEvals are blocked evaluations of five jobs in an order that is
// neither priority nor creation order; unblockOrder is the order they must
// come back in: by priority, then by when they were queued.
var (
	orderEvals = []struct {
		id, job     string
		priority    int
		createIndex uint64
	}{
		{"low-old", "j1", 30, 5},
		{"high-new", "j2", 80, 9},
		{"mid-new", "j3", 50, 8},
		{"high-old", "j4", 80, 6},
		{"mid-old", "j5", 50, 7},
	}
	unblockOrder = []string{"high-old", "high-new", "mid-old", "mid-new", "low-old"}
)

// recordingEnqueuer records the order BlockedEvals releases evaluations in.
type recordingEnqueuer struct {
	mu  sync.Mutex
	ids []string
}

func (r *recordingEnqueuer) Enqueue(eval *structs.Evaluation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, eval.ID)
}

func (r *recordingEnqueuer) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// TestBlockedEvals_UnblockOrder (issue 11 item 14e) checks the order the
// tracker itself releases blocked evaluations in, observed at the broker's
// door: by priority, then by when they were queued. (The broker orders its
// ready queue the same way, so reading the order back through Dequeue, as
// this test once did, could not see the tracker's order; a worker already
// waiting in Dequeue does get the first evaluation released.) Map order is
// random, so the check is repeated to catch an unsorted release.
func TestBlockedEvals_UnblockOrder(t *testing.T) {
	for round := 0; round < 20; round++ {
		rec := &recordingEnqueuer{}
		blocked := newBlockedEvals(rec)
		blocked.SetEnabled(true)
		for _, e := range orderEvals {
			ev := blockedEval(e.id, e.job, e.createIndex, e.createIndex)
			ev.Priority = e.priority
			blocked.Block(ev)
		}
		blocked.Unblock(20)
		waittest.Until(t, 5*time.Second, "five released evals", func() bool { return len(rec.got()) == len(orderEvals) })
		blocked.SetEnabled(false)
		if got := rec.got(); !slices.Equal(got, unblockOrder) {
			t.Fatalf("round %d: released in order %v, want %v", round, got, unblockOrder)
		}
	}
}

// TestBlockedEvals_DequeueOrder checks the same order end to end, through
// the broker: workers dequeue unblocked work by priority, then age.
func TestBlockedEvals_DequeueOrder(t *testing.T) {
	broker, blocked := newTestBlocked(t)
	for _, e := range orderEvals {
		ev := blockedEval(e.id, e.job, e.createIndex, e.createIndex)
		ev.Priority = e.priority
		blocked.Block(ev)
	}
	blocked.Unblock(20)
	waittest.Until(t, 5*time.Second, "five ready evals", func() bool { return broker.Stats().TotalReady == len(orderEvals) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, id := range unblockOrder {
		ev, _, err := broker.Dequeue(ctx, []string{"batch"})
		if err != nil {
			t.Fatalf("dequeue %d: %v", i, err)
		}
		if ev.ID != id {
			t.Fatalf("dequeue %d: got %s, want %s (order %v)", i, ev.ID, id, unblockOrder)
		}
	}
}
