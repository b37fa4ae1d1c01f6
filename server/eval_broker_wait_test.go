package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestEvalBroker_WaitUntil checks that an evaluation whose WaitUntil is in
// the future is not delivered before then, does not hold up the other
// evaluations of its job meanwhile, and is dropped by a flush.
func TestEvalBroker_WaitUntil(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{})
	b.SetEnabled(true)
	defer b.SetEnabled(false)

	const wait = 150 * time.Millisecond
	later := testEval("later", "job", 50, 1)
	until := time.Now().Add(wait)
	later.WaitUntil = until.UnixNano()
	b.Enqueue(later)
	b.Enqueue(later) // a retried enqueue is ignored
	if st := b.Stats(); st.TotalWaiting != 1 || st.TotalReady != 0 || st.TotalPending != 0 {
		t.Fatalf("stats %+v, want one delayed evaluation", st)
	}
	// An evaluation of the same job without WaitUntil is delivered at once.
	b.Enqueue(testEval("now", "job", 50, 2))
	ev, tok := dequeueWithin(t, b, time.Second)
	if ev.ID != "now" {
		t.Fatalf("got %s first, want now", ev.ID)
	}
	if err := b.Ack(ev.ID, tok); err != nil {
		t.Fatal(err)
	}
	ev, tok = dequeueWithin(t, b, 5*time.Second)
	if got := time.Now(); ev.ID != "later" || got.Before(until) {
		t.Fatalf("got %s at %s before its WaitUntil %s", ev.ID, got.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
	}
	if err := b.Ack(ev.ID, tok); err != nil {
		t.Fatal(err)
	}

	// A past WaitUntil is delivered at once.
	past := testEval("past", "job2", 50, 3)
	past.WaitUntil = time.Now().Add(-time.Hour).UnixNano()
	b.Enqueue(past)
	if st := b.Stats(); st.TotalReady != 1 || st.TotalWaiting != 0 {
		t.Fatalf("stats %+v, want the past evaluation ready", st)
	}
	ev, tok = dequeueWithin(t, b, time.Second)
	if err := b.Ack(ev.ID, tok); err != nil || ev.ID != "past" {
		t.Fatalf("got %s, ack %v", ev.ID, err)
	}

	// Disabling the broker drops a waiting evaluation; its timer does not
	// enqueue it afterwards.
	flushed := testEval("flushed", "job3", 50, 4)
	flushed.WaitUntil = time.Now().Add(20 * time.Millisecond).UnixNano()
	b.Enqueue(flushed)
	b.SetEnabled(false)
	b.SetEnabled(true)
	if st := b.Stats(); st.TotalWaiting != 0 {
		t.Fatalf("stats %+v after flush, want nothing delayed", st)
	}
	// Nothing is delivered through the flushed timer's deadline and well
	// past it.
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
	defer cancel()
	if ev, _, err := b.Dequeue(ctx, []string{structs.JobTypeBatch}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dequeue got %v, %v after the flush; want nothing", ev, err)
	}
}

// TestExploitBrokerStatsWaitingAndDelayedApart: an evaluation held until its
// WaitUntil counts as waiting, a nacked one held for its re-delivery delay
// as delayed; neither counts as the other.
func TestExploitBrokerStatsWaitingAndDelayedApart(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{InitialNackDelay: time.Hour})
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	later := testEval("later", "job-a", 50, 1)
	later.WaitUntil = time.Now().Add(time.Hour).UnixNano()
	b.Enqueue(later)
	if st := b.Stats(); st.TotalWaiting != 1 || st.TotalDelayed != 0 {
		t.Fatalf("after a WaitUntil enqueue: waiting %d delayed %d, want 1 and 0", st.TotalWaiting, st.TotalDelayed)
	}
	b.Enqueue(testEval("nacked", "job-b", 50, 2))
	ev, tok := dequeueWithin(t, b, time.Second)
	if err := b.Nack(ev.ID, tok); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.TotalWaiting != 1 || st.TotalDelayed != 1 {
		t.Fatalf("after a nack: waiting %d delayed %d, want 1 and 1", st.TotalWaiting, st.TotalDelayed)
	}
}
