package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// flakyServers is a ServerConn whose UpdateAllocs fails with a 503-class
// error (structs.ErrNotReady: a leader still applying the log) the first
// `refuse` times, then accepts updates of the allocations it knows and
// answers ErrNotFound naming the others.
type flakyServers struct {
	ServerConn
	mu      sync.Mutex
	refuse  int
	known   map[string]bool
	applied map[string]string // alloc ID -> client status
}

func (f *flakyServers) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse > 0 {
		f.refuse--
		return fmt.Errorf("update allocs: %w: leader not ready", structs.ErrNotReady)
	}
	var unknown []string
	for _, a := range allocs {
		if !f.known[a.ID] {
			unknown = append(unknown, a.ID)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown allocations %q: %w", unknown, structs.ErrNotFound)
	}
	for _, a := range allocs {
		f.applied[a.ID] = a.ClientStatus
	}
	return nil
}

func (f *flakyServers) status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied[id]
}

// TestAllocSyncerKeepsUpdatesUntilTheServersTakeThem: updates the servers
// refuse (no leader, a leader not ready) stay queued and are sent again
// until taken, the newest status winning; an update the ready leader does
// not know is dropped without holding up the others.
func TestAllocSyncerKeepsUpdatesUntilTheServersTakeThem(t *testing.T) {
	srv := &flakyServers{refuse: 3, known: map[string]bool{"a1": true, "a2": true}, applied: map[string]string{}}
	s := newAllocSyncer(srv, hclog.NewNullLogger(), 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()

	s.enqueue(&structs.Allocation{ID: "a1", NodeID: "n", ClientStatus: structs.AllocClientStatusRunning})
	s.enqueue(&structs.Allocation{ID: "gone", NodeID: "n", ClientStatus: structs.AllocClientStatusComplete})
	s.enqueue(&structs.Allocation{ID: "a2", NodeID: "n", ClientStatus: structs.AllocClientStatusComplete})
	s.enqueue(&structs.Allocation{ID: "a1", NodeID: "n", ClientStatus: structs.AllocClientStatusComplete})

	deadline := time.Now().Add(10 * time.Second)
	for srv.status("a1") != structs.AllocClientStatusComplete || srv.status("a2") != structs.AllocClientStatusComplete {
		if time.Now().After(deadline) {
			t.Fatalf("updates not delivered after the servers recovered: %v", srv.applied)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Nothing is left queued: the unknown one was dropped, not retried.
	waitEmpty := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		left := len(s.pending)
		s.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(waitEmpty) {
			t.Fatalf("%d updates still queued", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if _, ok := srv.applied["gone"]; ok || !slices.Equal([]string{srv.applied["a1"], srv.applied["a2"]}, []string{"complete", "complete"}) {
		t.Fatalf("applied %v", srv.applied)
	}
}

// gatedServers is a ServerConn whose UpdateAllocs records each batch and
// blocks while gate is held, failing the batches it is told to fail.
type gatedServers struct {
	ServerConn
	gate    sync.Mutex
	mu      sync.Mutex
	batches [][]string
	fail    int
	applied map[string]string
}

func (g *gatedServers) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	g.gate.Lock()
	defer g.gate.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for _, a := range allocs {
		ids = append(ids, a.ID+"="+a.ClientStatus)
	}
	slices.Sort(ids)
	g.batches = append(g.batches, ids)
	if g.fail > 0 {
		g.fail--
		return fmt.Errorf("update allocs: %w: no leader", structs.ErrNotLeader)
	}
	for _, a := range allocs {
		g.applied[a.ID] = a.ClientStatus
	}
	return nil
}

func (g *gatedServers) snapshot() ([][]string, map[string]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches), maps.Clone(g.applied)
}

// TestAllocSyncerSendsAtOnceAndCoalescesWhileInFlight: an update is sent
// as soon as it is queued, not on a tick; updates queued while a send is in flight go together in the
// next send; and when that send fails, neither they nor a newer status
// queued during the failed send are lost: they are resent until the
// servers take them, the newest status winning.
func TestAllocSyncerSendsAtOnceAndCoalescesWhileInFlight(t *testing.T) {
	g := &gatedServers{applied: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Sent at once: with an hour's retry wait, no tick or backoff could
	// deliver it within the test.
	s0 := newAllocSyncer(g, hclog.NewNullLogger(), time.Hour)
	ctx0, cancel0 := context.WithCancel(ctx)
	done0 := make(chan struct{})
	go func() { defer close(done0); s0.run(ctx0) }()
	s0.enqueue(&structs.Allocation{ID: "a0", ClientStatus: structs.AllocClientStatusRunning})
	waittest.Until(t, 5*time.Second, "a0 sent", func() bool {
		_, applied := g.snapshot()
		return applied["a0"] == structs.AllocClientStatusRunning
	})
	cancel0()
	<-done0

	s := newAllocSyncer(g, hclog.NewNullLogger(), time.Millisecond)
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()

	// Hold the servers: a1 is in flight, a2 and a3 queue behind it.
	g.gate.Lock()
	s.enqueue(&structs.Allocation{ID: "a1", ClientStatus: structs.AllocClientStatusRunning})
	waittest.Until(t, 5*time.Second, "a1 in flight", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending) == 0
	})
	g.mu.Lock()
	g.fail = 2 // the a1 send and the next one fail
	g.mu.Unlock()
	s.enqueue(&structs.Allocation{ID: "a2", ClientStatus: structs.AllocClientStatusRunning})
	s.enqueue(&structs.Allocation{ID: "a3", ClientStatus: structs.AllocClientStatusRunning})
	s.enqueue(&structs.Allocation{ID: "a1", ClientStatus: structs.AllocClientStatusComplete})
	g.gate.Unlock()

	waittest.Until(t, 10*time.Second, "every update taken", func() bool {
		_, applied := g.snapshot()
		return applied["a1"] == structs.AllocClientStatusComplete && applied["a2"] == structs.AllocClientStatusRunning && applied["a3"] == structs.AllocClientStatusRunning
	})
	cancel()
	<-done
	batches, _ := g.snapshot()
	want := [][]string{
		{"a0=running"},
		{"a1=running"}, // failed
		{"a1=complete", "a2=running", "a3=running"}, // failed: kept, a1's newer status kept over the failed one
		{"a1=complete", "a2=running", "a3=running"},
	}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("batches sent %v, want %v", batches, want)
	}
}
