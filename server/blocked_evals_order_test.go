package server

import (
	"context"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"testing"
	"time"
)

// TestBlockedEvals_UnblockOrder checks that queued work comes back by
// priority, then by when it was queued: the order workers dequeue it in.
func TestBlockedEvals_UnblockOrder(t *testing.T) {
	broker, blocked := newTestBlocked(t)
	evals := []struct {
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
	for _, e := range evals {
		ev := blockedEval(e.id, e.job, e.createIndex, e.createIndex)
		ev.Priority = e.priority
		blocked.Block(ev)
	}
	blocked.Unblock(20)
	waittest.Until(t, time.Second, "five ready evals", func() bool { return broker.Stats().TotalReady == len(evals) })
	want := []string{"high-old", "high-new", "mid-old", "mid-new", "low-old"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, id := range want {
		ev, _, err := broker.Dequeue(ctx, []string{"batch"})
		if err != nil {
			t.Fatalf("dequeue %d: %v", i, err)
		}
		if ev.ID != id {
			t.Fatalf("dequeue %d: got %s, want %s (order %v)", i, ev.ID, id, want)
		}
	}
}
