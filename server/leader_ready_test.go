package server

import (
	"context"
	"errors"
	"fmt"
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

// TestExploitCorruptEntryHaltsServer: a committed entry this server cannot
// decode halts its FSM; the server reports it on FatalCh (the agent stops
// with that message, naming the index and how to recover) and serves no
// reads from the state that lacks the entry.
func TestExploitCorruptEntryHaltsServer(t *testing.T) {
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
	f := s.raft.Apply([]byte{byte(structs.JobRegisterRequestType), 0xc1, 0xff}, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.FatalCh():
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("raft index %d", f.Index())) || !strings.Contains(msg, "wipe its data dir") {
			t.Fatalf("fatal error %q does not name index %d and the recovery", msg, f.Index())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a halted FSM was not reported on FatalCh")
	}
	if _, _, err := s.JobList(ctx, &structs.QueryOptions{AllowStale: true}); !errors.Is(err, structs.ErrNotReady) {
		t.Fatalf("stale read on a halted server: %v, want ErrNotReady", err)
	}
	if _, _, err := s.JobList(ctx, nil); err == nil {
		t.Fatal("a halted server answered a default read")
	}
}
