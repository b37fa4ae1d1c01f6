package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

// TestExploitLeaderNotReadyRefusesWork: between winning an election and
// its barrier having applied the log, a leader's state may lack committed
// entries (after all servers restarted it held 0 allocations for 0.34 s).
// It must then refuse writes (a client's allocation update would be judged
// against the missing allocations and dropped), default reads and stale
// reads, with a 503-class error, instead of serving that state.
func TestExploitLeaderNotReadyRefusesWork(t *testing.T) {
	_, trans := raft.NewInmemTransport("")
	s, err := NewServer(&Config{DataDir: t.TempDir(), NodeName: "s1", Transport: trans, DevMode: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// As right after an election, before establishLeadership finished.
	s.established.Store(false)
	s.caughtUp.Store(false)

	err = s.UpdateAllocs(ctx, []*structs.Allocation{{ID: "alloc-the-leader-has-not-applied-yet", ClientStatus: structs.AllocClientStatusComplete}})
	if !errors.Is(err, structs.ErrNotReady) || !strings.Contains(err.Error(), "leader not ready") {
		t.Fatalf("alloc update on a leader not ready: %v, want ErrNotReady", err)
	}
	if _, err := s.JobRegister(ctx, statetest.BatchJob(0)); !errors.Is(err, structs.ErrNotReady) {
		t.Fatalf("job register on a leader not ready: %v, want ErrNotReady", err)
	}
	if _, _, err := s.JobList(ctx, nil); !errors.Is(err, structs.ErrNotLeader) {
		t.Fatalf("default read on a leader not ready: %v, want ErrNotLeader", err)
	}
	if _, _, err := s.JobList(ctx, &structs.QueryOptions{AllowStale: true}); !errors.Is(err, structs.ErrNotReady) {
		t.Fatalf("stale read on a leader not ready: %v, want ErrNotReady", err)
	}
	s.established.Store(true)
	if _, _, err := s.JobList(ctx, &structs.QueryOptions{AllowStale: true}); err != nil {
		t.Fatalf("stale read on a ready leader: %v", err)
	}
}
