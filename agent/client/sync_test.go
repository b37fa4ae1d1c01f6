package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

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
