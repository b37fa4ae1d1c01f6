package server_test

import (
	"errors"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// finishAllocs reports the allocations finished with status through s (a
// follower forwards), as a client would.
func finishAllocs(t *testing.T, s *server.Server, status string, allocs ...*structs.Allocation) {
	t.Helper()
	var upd []*structs.Allocation
	for _, a := range allocs {
		c := a.Copy()
		c.ClientStatus = status
		upd = append(upd, c)
	}
	if err := s.UpdateAllocs(ctxT(t), upd); err != nil {
		t.Fatalf("update allocations: %v", err)
	}
}

// evalsSettled waits until every evaluation of job on s is terminal.
func evalsSettled(t *testing.T, s *server.Server, jobID string) {
	t.Helper()
	waittest.NoErr(t, 10*time.Second, "the evaluations of "+jobID+" to finish", func() (bool, error) {
		evals, err := s.State().EvalsByJob(nil, jobID)
		if err != nil {
			return false, err
		}
		for _, e := range evals {
			if !e.TerminalStatus() {
				return false, nil
			}
		}
		return len(evals) > 0, nil
	})
}

// present reports which of the allocation IDs server s still holds.
func present(t *testing.T, s *server.Server, ids ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range ids {
		a, err := s.State().AllocByID(nil, id)
		if err != nil {
			t.Fatal(err)
		}
		if a != nil {
			out[id] = true
		}
	}
	return out
}

// TestServer_SystemGC runs forced collections through a real server: a
// purged job's finished allocation and its evaluations go; a live batch
// job keeps its completed allocation (else it would run again) until the
// job is dead, and then goes whole.
func TestServer_SystemGC(t *testing.T) {
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) { c.GC.Interval = -1 }))
	registerNode(t, s, 0)

	batch := statetest.BatchJob(0)
	batch.TaskGroups[0].Count = 2
	if _, err := s.JobRegister(ctxT(t), batch); err != nil {
		t.Fatal(err)
	}
	ba := runningAllocs(t, s, batch.ID, 2)
	finishAllocs(t, s, structs.AllocClientStatusComplete, ba[0])
	finishAllocs(t, s, structs.AllocClientStatusRunning, ba[1])

	svc := statetest.Job()
	if _, err := s.JobRegister(ctxT(t), svc); err != nil {
		t.Fatal(err)
	}
	sa := runningAllocs(t, s, svc.ID, 1)[0]
	finishAllocs(t, s, structs.AllocClientStatusRunning, sa)
	if _, err := s.JobDeregister(ctxT(t), svc.ID, true); err != nil {
		t.Fatal(err)
	}
	evalsSettled(t, s, svc.ID)
	finishAllocs(t, s, structs.AllocClientStatusComplete, sa)
	evalsSettled(t, s, batch.ID)

	res, err := s.SystemGC(ctxT(t))
	if err != nil {
		t.Fatalf("system gc: %v", err)
	}
	if res.Allocs < 1 || res.Evals < 1 || res.Jobs != 0 {
		t.Errorf("first collection %+v: want the purged job's allocation and evaluations, no job", res)
	}
	if got := present(t, s, sa.ID, ba[0].ID, ba[1].ID); got[sa.ID] || !got[ba[0].ID] || !got[ba[1].ID] {
		t.Fatalf("after the first collection present = %v: want the purged job's allocation gone, both batch allocations kept", got)
	}
	if evals, _ := s.State().EvalsByJob(nil, svc.ID); len(evals) != 0 {
		t.Errorf("purged job keeps %d evaluations", len(evals))
	}

	// The last batch allocation completes: the job is dead and goes whole.
	finishAllocs(t, s, structs.AllocClientStatusComplete, ba[1])
	waittest.NoErr(t, 10*time.Second, "the batch job to be dead", func() (bool, error) {
		j, err := s.State().JobByID(nil, batch.ID)
		return j != nil && j.Status == structs.JobStatusDead, err
	})
	evalsSettled(t, s, batch.ID)
	res, err = s.SystemGC(ctxT(t))
	if err != nil {
		t.Fatalf("second system gc: %v", err)
	}
	if res.Jobs != 1 {
		t.Errorf("second collection %+v: want the dead batch job", res)
	}
	if jobOn(t, s, batch.ID) || len(present(t, s, ba[0].ID, ba[1].ID)) != 0 {
		t.Fatal("dead batch job or its allocations survived the collection")
	}
	if evals, _ := s.State().EvalsByJob(nil, batch.ID); len(evals) != 0 {
		t.Errorf("purged batch job keeps %d evaluations", len(evals))
	}
}

// TestCluster_SystemGCFromFollower forces a collection on a follower: it is
// forwarded to the leader, and every server ends with the same state, the
// purged job's allocation gone.
func TestCluster_SystemGCFromFollower(t *testing.T) {
	c := servertest.NewCluster(t, 3, servertest.WithConfig(func(cfg *server.Config) { cfg.GC.Interval = -1 }))
	l := c.Server(c.WaitForLeader())
	f := c.Server(c.Follower())
	registerNode(t, f, 0)
	job := statetest.Job()
	c.Register(job)
	a := runningAllocs(t, l, job.ID, 1)[0]
	finishAllocs(t, f, structs.AllocClientStatusRunning, a)
	if _, err := f.JobDeregister(ctxT(t), job.ID, true); err != nil {
		t.Fatal(err)
	}
	evalsSettled(t, l, job.ID)
	finishAllocs(t, f, structs.AllocClientStatusComplete, a)
	c.WaitForConvergence(convergeTimeout)
	before, _, err := l.StateHash()
	if err != nil {
		t.Fatal(err)
	}

	res, err := f.SystemGC(ctxT(t))
	if err != nil {
		t.Fatalf("system gc on a follower: %v", err)
	}
	if res.Allocs != 1 || res.Evals < 1 {
		t.Errorf("collection %+v: want the purged job's allocation and evaluations", res)
	}
	after := c.WaitForConvergence(convergeTimeout)
	if after == before {
		t.Fatal("the collection changed nothing")
	}
	for i, s := range c.Servers() {
		if present(t, s, a.ID)[a.ID] {
			t.Errorf("server %d still holds the purged job's allocation", i)
		}
		if evals, _ := s.State().EvalsByJob(nil, job.ID); len(evals) != 0 {
			t.Errorf("server %d still holds %d evaluations of the purged job", i, len(evals))
		}
	}
}

// TestCluster_SystemGCOnFollowerWithoutForwarding checks the error a
// follower returns when it cannot forward in process.
func TestCluster_SystemGCOnFollowerWithoutForwarding(t *testing.T) {
	c := servertest.NewCluster(t, 3, servertest.WithConfig(func(cfg *server.Config) { cfg.LeaderLookup = nil }))
	c.WaitForLeader()
	f := c.Server(c.Follower())
	if _, err := f.SystemGC(ctxT(t)); !errors.Is(err, structs.ErrNotLeader) {
		t.Fatalf("system gc on a follower = %v, want ErrNotLeader", err)
	}
}

// TestServer_PeriodicGC checks that the leader collects on its own, every
// GCConfig.Interval, with the configured thresholds.
func TestServer_PeriodicGC(t *testing.T) {
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.GC = server.GCConfig{Interval: 20 * time.Millisecond, PurgedJobGCThreshold: time.Nanosecond}
	}))
	registerNode(t, s, 0)
	job := statetest.Job()
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	a := runningAllocs(t, s, job.ID, 1)[0]
	if _, err := s.JobDeregister(ctxT(t), job.ID, true); err != nil {
		t.Fatal(err)
	}
	evalsSettled(t, s, job.ID)
	if !present(t, s, a.ID)[a.ID] {
		t.Fatal("the allocation went before its client finished it")
	}
	finishAllocs(t, s, structs.AllocClientStatusComplete, a)
	waittest.NoErr(t, 10*time.Second, "the periodic collection of the purged job's allocation", func() (bool, error) {
		return !present(t, s, a.ID)[a.ID], nil
	})
}
