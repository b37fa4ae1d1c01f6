package server

import (
	"context"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

func blockedEval(id, job string, createIndex, snapshotIndex uint64) *structs.Evaluation {
	e := testEval(id, job, 50, createIndex)
	e.Status = structs.EvalStatusBlocked
	e.SnapshotIndex = snapshotIndex
	return e
}

func newTestBlocked(t *testing.T) (*EvalBroker, *BlockedEvals) {
	t.Helper()
	broker := NewEvalBroker(EvalBrokerConfig{})
	broker.SetEnabled(true)
	blocked := NewBlockedEvals(broker)
	blocked.SetEnabled(true)
	t.Cleanup(func() {
		blocked.SetEnabled(false)
		broker.SetEnabled(false)
	})
	return broker, blocked
}

func TestBlockedEvals_UnblockEnqueuesAll(t *testing.T) {
	broker, blocked := newTestBlocked(t)
	blocked.Block(blockedEval("b1", "j1", 5, 5))
	blocked.Block(blockedEval("b2", "j2", 6, 6))
	blocked.Block(testEval("p1", "j3", 50, 7)) // not blocked: ignored
	if st := blocked.Stats(); st.TotalBlocked != 2 {
		t.Fatalf("blocked %d want 2", st.TotalBlocked)
	}
	blocked.Unblock(10)
	waittest.Until(t, time.Second, "two ready evals", func() bool { return broker.Stats().TotalReady == 2 })
	if st := blocked.Stats(); st.TotalBlocked != 0 || st.LastUnblockIndex != 10 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBlockedEvals_NewerReplacesOlder(t *testing.T) {
	cases := []struct {
		name      string
		first     *structs.Evaluation
		second    *structs.Evaluation
		wantKept  string
		wantDupID string
	}{
		{"newer replaces", blockedEval("old", "j", 5, 5), blockedEval("new", "j", 9, 9), "new", "old"},
		{"older is the duplicate", blockedEval("new", "j", 9, 9), blockedEval("old", "j", 5, 5), "new", "old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			broker, blocked := newTestBlocked(t)
			blocked.Block(tc.first)
			blocked.Block(tc.second)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			dups, err := blocked.Duplicates(ctx)
			if err != nil || len(dups) != 1 || dups[0].ID != tc.wantDupID {
				t.Fatalf("duplicates %v %v, want [%s]", dups, err, tc.wantDupID)
			}
			blocked.Unblock(100)
			ev, tok := dequeueWithin(t, broker, time.Second)
			if ev.ID != tc.wantKept {
				t.Fatalf("unblocked %s want %s", ev.ID, tc.wantKept)
			}
			if err := broker.Ack(ev.ID, tok); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBlockedEvals_MissedUnblock(t *testing.T) {
	broker, blocked := newTestBlocked(t)
	blocked.Unblock(20)
	waittest.Until(t, time.Second, "unblock index recorded", func() bool { return blocked.Stats().LastUnblockIndex == 20 })
	// Planned on a snapshot at 15: capacity changed at 20, so it goes
	// straight back to the broker.
	blocked.Block(blockedEval("b1", "j1", 15, 15))
	// Planned at 25: stays blocked.
	blocked.Block(blockedEval("b2", "j2", 25, 25))
	if st := broker.Stats(); st.TotalReady != 1 {
		t.Fatalf("ready %d want 1", st.TotalReady)
	}
	if st := blocked.Stats(); st.TotalBlocked != 1 {
		t.Fatalf("blocked %d want 1", st.TotalBlocked)
	}
}

func TestBlockedEvals_Disabled(t *testing.T) {
	broker := NewEvalBroker(EvalBrokerConfig{})
	blocked := NewBlockedEvals(broker)
	blocked.Block(blockedEval("b1", "j1", 5, 5))
	blocked.Unblock(9)
	if st := blocked.Stats(); st.TotalBlocked != 0 {
		t.Fatalf("disabled tracker holds %d", st.TotalBlocked)
	}
	blocked.SetEnabled(true)
	blocked.Block(blockedEval("b1", "j1", 5, 5))
	blocked.SetEnabled(false)
	if st := blocked.Stats(); st.TotalBlocked != 0 {
		t.Fatalf("flush left %d", st.TotalBlocked)
	}
}
