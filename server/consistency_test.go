package server_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// registerJobs registers n batch jobs named prefix-0.. through the leader.
func registerJobs(c *servertest.Cluster, prefix string, n int) {
	for i := 0; i < n; i++ {
		job := statetest.BatchJob(0)
		job.ID = fmt.Sprintf("%s-%d", prefix, i)
		job.Name = job.ID
		c.Register(job)
	}
}

// TestExploitDeposedLeaderRefusesDefaultRead: a leader cut off from its
// peers still believes it leads for up to its lease; a default
// (consistent) read on it must not be answered from its state, which no
// longer grows, but refused once it cannot confirm its leadership with a
// quorum. A VerifyLeader made a no-op answers at once and fails this.
func TestExploitDeposedLeaderRefusesDefaultRead(t *testing.T) {
	c := servertest.NewCluster(t, 3)
	registerJobs(c, "before", 3)
	old := c.WaitForLeader()
	s := c.Server(old)
	c.Partition(old)
	if !s.IsLeader() {
		t.Skip("the partitioned leader stepped down before the read (a slow host)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	jobs, meta, err := s.JobList(ctx, nil)
	if err == nil {
		t.Fatalf("a leader cut off from its peers answered a default read after %s: %d jobs at index %d", time.Since(start), len(jobs), meta.Index)
	}
	if !errors.Is(err, structs.ErrNotLeader) && !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("default read on a deposed leader: %v, want ErrNotLeader or ErrNoLeader", err)
	}
	// Its ?stale read is still answered from its own (caught-up) state.
	if _, _, err := s.JobList(ctx, &structs.QueryOptions{AllowStale: true}); err != nil {
		t.Fatalf("stale read on a partitioned server: %v", err)
	}
	c.Heal()
}

// TestDefaultReadOnFollowerIsTheLeaders: a default read on a
// follower is answered by the leader, with the leader's index.
func TestDefaultReadOnFollowerIsTheLeaders(t *testing.T) {
	c := servertest.NewCluster(t, 3)
	registerJobs(c, "j", 2)
	l := c.Server(c.WaitForLeader())
	f := c.Server(c.Follower())
	_, lmeta, err := l.JobList(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs, fmeta, err := f.JobList(ctxT(t), nil)
	if err != nil || len(jobs) != 2 || fmeta.Index < lmeta.Index {
		t.Fatalf("default read on a follower: %d jobs at index %d (leader %d), %v", len(jobs), fmeta.Index, lmeta.Index, err)
	}
}

// TestExploitRestartedServerRefusesStaleReadsUntilCaughtUp: a server that
// restarts holds only its last snapshot until the leader tells it the
// commit index; until it has applied that far it must refuse ?stale reads
// (structs.ErrNotReady) instead of answering with an empty world, and every
// answer it gives has all the jobs and an index not below what the leader
// served before.
func TestExploitRestartedServerRefusesStaleReadsUntilCaughtUp(t *testing.T) {
	c := servertest.NewCluster(t, 3)
	registerJobs(c, "j", 10)
	l := c.Server(c.WaitForLeader())
	_, lmeta, err := l.JobList(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	fi := c.Follower()
	c.WaitForConvergence(10 * time.Second)
	c.Kill(fi)
	c.Restart(fi)
	s := c.Server(fi)
	var refused int
	deadline := time.Now().Add(10 * time.Second)
	for {
		jobs, meta, err := s.JobList(ctxT(t), &structs.QueryOptions{AllowStale: true})
		if err != nil {
			if !errors.Is(err, structs.ErrNotReady) {
				t.Fatalf("stale read on a restarted server: %v, want nil or ErrNotReady", err)
			}
			refused++
			if time.Now().After(deadline) {
				t.Fatalf("restarted server never caught up: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if len(jobs) != 10 || meta.Index < lmeta.Index {
			t.Fatalf("restarted server answered a stale read with %d jobs at index %d; the leader had 10 at %d", len(jobs), meta.Index, lmeta.Index)
		}
		break
	}
	t.Logf("stale reads refused %d times before the server caught up", refused)
}

// TestExploitUpdateAllocsUnknownIsError: a client update for an allocation
// the leader does not know is an error naming it (the client drops it or
// retries), never a silent success.
func TestExploitUpdateAllocsUnknownIsError(t *testing.T) {
	s := servertest.NewServer(t)
	err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: "no-such-alloc", ClientStatus: structs.AllocClientStatusComplete}})
	if !errors.Is(err, structs.ErrNotFound) || !strings.Contains(err.Error(), "no-such-alloc") {
		t.Fatalf("update of an unknown allocation: %v, want ErrNotFound naming it", err)
	}
}

// TestBlockingQueryOnOneIDWakes: a blocking query on one job, allocation,
// evaluation or node returns promptly (well before its 30 s wait) once that
// object changes (a lookup by ID that adds no watch never wakes).
func TestBlockingQueryOnOneIDWakes(t *testing.T) {
	s := servertest.NewServer(t)
	node := statetest.Node(0)
	if _, err := s.NodeRegister(ctxT(t), node); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(0)
	reg, err := s.JobRegister(ctxT(t), job)
	if err != nil {
		t.Fatal(err)
	}
	alloc := runningAllocs(t, s, job.ID, 1)[0]
	// Let the evaluation settle, so the change below is the only one.
	waittest.NoErr(t, 10*time.Second, "evaluation complete", func() (bool, error) {
		e, _, err := s.EvalGet(ctxT(t), reg.EvalID, nil)
		return err == nil && e.Status == structs.EvalStatusComplete, err
	})

	cases := []struct {
		name   string
		query  func(ctx context.Context, q *structs.QueryOptions) (structs.QueryMeta, error)
		change func() error
	}{
		{"alloc", func(ctx context.Context, q *structs.QueryOptions) (structs.QueryMeta, error) {
			_, m, err := s.AllocGet(ctx, alloc.ID, q)
			return m, err
		}, func() error {
			return s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning}})
		}},
		{"node", func(ctx context.Context, q *structs.QueryOptions) (structs.QueryMeta, error) {
			_, m, err := s.NodeGet(ctx, node.ID, q)
			return m, err
		}, func() error {
			_, err := s.NodeUpdateStatus(ctxT(t), node.ID, structs.NodeStatusDown)
			return err
		}},
		{"job", func(ctx context.Context, q *structs.QueryOptions) (structs.QueryMeta, error) {
			_, m, err := s.JobGet(ctx, job.ID, q)
			return m, err
		}, func() error {
			j := job.Copy()
			j.Meta = map[string]string{"changed": "yes"}
			_, err := s.JobRegister(ctxT(t), j)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta, err := tc.query(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			blockUntilChange(t, meta, tc.query, tc.change)
		})
	}
	// An evaluation changes when the scheduler completes it: block on a new
	// one while it is still pending.
	t.Run("eval", func(t *testing.T) {
		for try := 0; try < 20; try++ {
			j := statetest.BatchJob(0)
			j.ID = fmt.Sprintf("eval-wake-%d", try)
			r, err := s.JobRegister(ctxT(t), j)
			if err != nil {
				t.Fatal(err)
			}
			e, meta, err := s.EvalGet(ctxT(t), r.EvalID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != structs.EvalStatusPending {
				continue // the scheduler was faster than the read; try again
			}
			blockUntilChange(t, meta, func(ctx context.Context, q *structs.QueryOptions) (structs.QueryMeta, error) {
				_, m, err := s.EvalGet(ctx, r.EvalID, q)
				return m, err
			}, func() error { return nil })
			return
		}
		t.Skip("every evaluation completed before it could be read pending")
	})
}

// blockUntilChange starts query blocked at meta.Index, makes change, and
// fails unless the query returns with a higher index within 5 seconds.
func blockUntilChange(t *testing.T, meta structs.QueryMeta, query func(ctx context.Context, q *structs.QueryOptions) (structs.QueryMeta, error), change func() error) {
	t.Helper()
	type result struct {
		meta structs.QueryMeta
		err  error
	}
	done := make(chan result, 1)
	go func() {
		m, err := query(context.Background(), &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: 30 * time.Second})
		done <- result{m, err}
	}()
	// Give the query time to block; should it start after the change it
	// returns at once, which passes too.
	time.Sleep(50 * time.Millisecond)
	if err := change(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.meta.Index <= meta.Index {
			t.Fatalf("woke with index %d (from %d), %v", r.meta.Index, meta.Index, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a blocking query on one object did not wake within 5s of its change")
	}
}
