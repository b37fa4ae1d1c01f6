package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

func testEval(id, job string, prio int, createIndex uint64) *structs.Evaluation {
	return &structs.Evaluation{
		ID: id, Namespace: "default", JobID: job, Priority: prio, Type: structs.JobTypeBatch,
		Status: structs.EvalStatusPending, CreateIndex: createIndex, ModifyIndex: createIndex,
	}
}

func dequeueWithin(t *testing.T, b *EvalBroker, d time.Duration) (*structs.Evaluation, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ev, tok, err := b.Dequeue(ctx, []string{structs.JobTypeBatch, structs.JobTypeService})
	if err != nil {
		t.Fatalf("dequeue: %v", err)
	}
	return ev, tok
}

func expectEmpty(t *testing.T, b *EvalBroker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ev, _, err := b.Dequeue(ctx, []string{structs.JobTypeBatch, structs.JobTypeService})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dequeue got %v, %v; want nothing ready", ev, err)
	}
}

func TestEvalBroker_PriorityOrder(t *testing.T) {
	cases := []struct {
		name  string
		evals []*structs.Evaluation
		want  []string
	}{
		{"priority first", []*structs.Evaluation{testEval("a", "j1", 10, 1), testEval("b", "j2", 90, 2), testEval("c", "j3", 50, 3)}, []string{"b", "c", "a"}},
		{"create index breaks ties", []*structs.Evaluation{testEval("a", "j1", 50, 9), testEval("b", "j2", 50, 3), testEval("c", "j3", 50, 5)}, []string{"b", "c", "a"}},
		{"across types", []*structs.Evaluation{testEval("a", "j1", 20, 1), func() *structs.Evaluation {
			e := testEval("b", "j2", 70, 2)
			e.Type = structs.JobTypeService
			return e
		}()}, []string{"b", "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewEvalBroker(EvalBrokerConfig{})
			b.SetEnabled(true)
			defer b.SetEnabled(false)
			for _, e := range tc.evals {
				b.Enqueue(e)
			}
			for _, want := range tc.want {
				ev, tok := dequeueWithin(t, b, time.Second)
				if ev.ID != want {
					t.Fatalf("dequeued %s, want %s", ev.ID, want)
				}
				if err := b.Ack(ev.ID, tok); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			expectEmpty(t, b)
		})
	}
}

func TestEvalBroker_PerJobSerialization(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{})
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	b.Enqueue(testEval("e1", "job", 50, 1))
	b.Enqueue(testEval("e2", "job", 50, 2))
	b.Enqueue(testEval("o1", "other", 10, 3))

	ev1, tok1 := dequeueWithin(t, b, time.Second)
	if ev1.ID != "e1" {
		t.Fatalf("got %s want e1", ev1.ID)
	}
	// e2 must wait for e1: the only ready evaluation is the other job's.
	ev, tok := dequeueWithin(t, b, time.Second)
	if ev.ID != "o1" {
		t.Fatalf("got %s want o1 (e2 must wait for e1's ack)", ev.ID)
	}
	if err := b.Ack(ev.ID, tok); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.TotalPending != 1 || st.TotalUnacked != 1 {
		t.Fatalf("stats %+v: want 1 pending, 1 unacked", st)
	}
	expectEmpty(t, b)
	if err := b.Ack(ev1.ID, tok1); err != nil {
		t.Fatal(err)
	}
	ev2, tok2 := dequeueWithin(t, b, time.Second)
	if ev2.ID != "e2" {
		t.Fatalf("got %s want e2", ev2.ID)
	}
	if err := b.Ack(ev2.ID, tok2); err != nil {
		t.Fatal(err)
	}
}

func TestEvalBroker_AckNackErrors(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{})
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	b.Enqueue(testEval("e1", "job", 50, 1))
	ev, tok := dequeueWithin(t, b, time.Second)
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"ack wrong token", func() error { return b.Ack(ev.ID, "nope") }, ErrTokenMismatch},
		{"nack wrong token", func() error { return b.Nack(ev.ID, "nope") }, ErrTokenMismatch},
		{"reset wrong token", func() error { return b.OutstandingReset(ev.ID, "nope") }, ErrTokenMismatch},
		{"ack unknown", func() error { return b.Ack("missing", tok) }, ErrNotOutstanding},
		{"ack right token", func() error { return b.Ack(ev.ID, tok) }, nil},
		{"ack twice", func() error { return b.Ack(ev.ID, tok) }, ErrNotOutstanding},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v want %v", err, tc.want)
			}
		})
	}
}

func TestEvalBroker_NackRedeliveryAndFailure(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{InitialNackDelay: 10 * time.Millisecond, SubsequentNackDelay: 30 * time.Millisecond, DeliveryLimit: 3})
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	b.Enqueue(testEval("e1", "job", 50, 1))
	b.Enqueue(testEval("e2", "job", 50, 2))

	for i := 1; i <= 3; i++ {
		start := time.Now()
		ev, tok := dequeueWithin(t, b, 2*time.Second)
		if ev.ID != "e1" {
			t.Fatalf("delivery %d: got %s want e1 (same job must stay serialized)", i, ev.ID)
		}
		if i == 3 && time.Since(start) < 25*time.Millisecond {
			t.Fatalf("third delivery came after %s, want the subsequent delay", time.Since(start))
		}
		if err := b.Nack(ev.ID, tok); err != nil {
			t.Fatalf("nack %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	failed, err := b.DequeueFailed(ctx)
	if err != nil || failed.ID != "e1" {
		t.Fatalf("failed queue: %v %v", failed, err)
	}
	// The job slot is free again: e2 is delivered.
	ev, tok := dequeueWithin(t, b, time.Second)
	if ev.ID != "e2" {
		t.Fatalf("got %s want e2", ev.ID)
	}
	if err := b.Ack(ev.ID, tok); err != nil {
		t.Fatal(err)
	}
}

func TestEvalBroker_NackTimeout(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{NackTimeout: 20 * time.Millisecond, InitialNackDelay: -1})
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	b.Enqueue(testEval("e1", "job", 50, 1))
	ev, tok := dequeueWithin(t, b, time.Second)
	ev2, tok2 := dequeueWithin(t, b, 2*time.Second)
	if ev2.ID != ev.ID || tok2 == tok {
		t.Fatalf("redelivery got %s/%s, want %s with a new token", ev2.ID, tok2, ev.ID)
	}
	if err := b.Ack(ev.ID, tok); !errors.Is(err, ErrTokenMismatch) {
		t.Fatalf("stale ack: %v", err)
	}
	if err := b.Ack(ev2.ID, tok2); err != nil {
		t.Fatal(err)
	}
}

func TestEvalBroker_DisabledDropsAndFlushes(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{})
	b.Enqueue(testEval("e1", "job", 50, 1))
	b.SetEnabled(true)
	expectEmpty(t, b)
	b.Enqueue(testEval("e2", "job", 50, 2))
	b.Enqueue(testEval("e2", "job", 50, 2)) // duplicate is ignored
	if st := b.Stats(); st.TotalReady != 1 {
		t.Fatalf("ready %d want 1", st.TotalReady)
	}
	b.SetEnabled(false)
	b.SetEnabled(true)
	if st := b.Stats(); st.TotalReady != 0 {
		t.Fatalf("ready %d after flush, want 0", st.TotalReady)
	}
	b.SetEnabled(false)
}

func TestEvalBroker_RequeueWhileOutstanding(t *testing.T) {
	b := NewEvalBroker(EvalBrokerConfig{})
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	b.Enqueue(testEval("e1", "job", 50, 1))
	ev, tok := dequeueWithin(t, b, time.Second)
	b.Enqueue(ev) // e.g. unblocked while its worker still holds it
	expectEmpty(t, b)
	if err := b.Ack(ev.ID, tok); err != nil {
		t.Fatal(err)
	}
	again, tok2 := dequeueWithin(t, b, time.Second)
	if again.ID != "e1" {
		t.Fatalf("got %s want e1 again", again.ID)
	}
	if err := b.Ack(again.ID, tok2); err != nil {
		t.Fatal(err)
	}
	expectEmpty(t, b)
}
