package server_test

import (
	"context"
	"errors"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"slices"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func registerNode(t *testing.T, s *server.Server, gpus int) *structs.Node {
	t.Helper()
	n := statetest.Node(gpus)
	n.Status = structs.NodeStatusInit
	ttl, err := s.NodeRegister(ctxT(t), n)
	if err != nil {
		t.Fatalf("node register: %v", err)
	}
	if ttl < server.DefaultMinHeartbeatTTL {
		t.Fatalf("ttl %s below the minimum", ttl)
	}
	return n
}

// runningAllocs waits until job has want allocations that desire to run.
func runningAllocs(t *testing.T, s *server.Server, jobID string, want int) []*structs.Allocation {
	t.Helper()
	var out []*structs.Allocation
	waittest.NoErr(t, 10*time.Second, "allocations of "+jobID, func() (bool, error) {
		allocs, _, err := s.JobAllocations(ctxT(t), jobID, nil)
		out = nil
		for _, a := range allocs {
			if a.DesiredStatus == structs.AllocDesiredStatusRun {
				out = append(out, a)
			}
		}
		return len(out) == want, err
	})
	return out
}

func TestServer_TCPTransportBecomesLeader(t *testing.T) {
	s := servertest.Start(t, servertest.Config(t, servertest.WithConfig(func(c *server.Config) {
		c.Transport = nil
		c.RaftBindAddr = "127.0.0.1:0"
	})))
	if !s.IsLeader() || s.Leader() == "" {
		t.Fatalf("leader=%v addr=%q", s.IsLeader(), s.Leader())
	}
	if p := s.Peers(); len(p) != 1 {
		t.Fatalf("peers %v", p)
	}
	if st := s.Stats(); st["raft.state"] != "Leader" || st["leader"] != "true" {
		t.Fatalf("stats %v", st)
	}
}

func TestServer_PlacesGPUJobWithExactDevices(t *testing.T) {
	s := servertest.NewServer(t)
	node := registerNode(t, s, 2)
	job := statetest.BatchJob(1)
	resp, err := s.JobRegister(ctxT(t), job)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if resp.EvalID == "" || resp.EvalCreateIndex == 0 || resp.JobModifyIndex == 0 || resp.Index == 0 {
		t.Fatalf("response %+v", resp)
	}
	allocs := runningAllocs(t, s, job.ID, 1)
	a := allocs[0]
	if a.NodeID != node.ID {
		t.Fatalf("alloc on node %s want %s", a.NodeID, node.ID)
	}
	ids := a.DeviceIDs()
	if len(ids) != 1 || !slices.Contains(node.NodeResources.Devices[0].HealthyInstances(), ids[0]) {
		t.Fatalf("device IDs %v, want one of %v", ids, node.NodeResources.Devices[0].HealthyInstances())
	}
	waittest.NoErr(t, 5*time.Second, "eval complete", func() (bool, error) {
		e, _, err := s.EvalGet(ctxT(t), resp.EvalID, nil)
		return err == nil && e.Status == structs.EvalStatusComplete, err
	})
	// The client's watch sees it too.
	nodeAllocs, meta, err := s.NodeAllocations(ctxT(t), node.ID, nil)
	if err != nil || len(nodeAllocs) != 1 || meta.Index < a.ModifyIndex || !meta.KnownLeader {
		t.Fatalf("node allocations %v %+v %v", nodeAllocs, meta, err)
	}
}

func TestServer_BlockedJobPlacedWhenCapacityFrees(t *testing.T) {
	s := servertest.NewServer(t)
	registerNode(t, s, 2)
	first := statetest.BatchJob(2)
	if _, err := s.JobRegister(ctxT(t), first); err != nil {
		t.Fatal(err)
	}
	firstAllocs := runningAllocs(t, s, first.ID, 1)

	second := statetest.BatchJob(2)
	resp, err := s.JobRegister(ctxT(t), second)
	if err != nil {
		t.Fatal(err)
	}
	var evalDone *structs.Evaluation
	waittest.NoErr(t, 10*time.Second, "second job's eval to finish", func() (bool, error) {
		e, _, err := s.EvalGet(ctxT(t), resp.EvalID, nil)
		evalDone = e
		return err == nil && e.TerminalStatus(), err
	})
	if evalDone.BlockedEval == "" || len(evalDone.FailedTGAllocs) == 0 {
		t.Fatalf("eval %+v: want a blocked eval and FailedTGAllocs", evalDone)
	}
	for g, m := range evalDone.FailedTGAllocs {
		if m.DimensionExhausted["devices: nvidia/gpu"] == 0 {
			t.Fatalf("group %s metric %+v: want devices exhausted", g, m)
		}
	}
	blocked, _, err := s.EvalGet(ctxT(t), evalDone.BlockedEval, nil)
	if err != nil || blocked.Status != structs.EvalStatusBlocked {
		t.Fatalf("blocked eval %+v %v", blocked, err)
	}
	if allocs, _, _ := s.JobAllocations(ctxT(t), second.ID, nil); len(allocs) != 0 {
		t.Fatalf("second job has %d allocs while blocked", len(allocs))
	}

	done := firstAllocs[0].Copy()
	done.ClientStatus = structs.AllocClientStatusComplete
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{done}); err != nil {
		t.Fatal(err)
	}
	secondAllocs := runningAllocs(t, s, second.ID, 1)
	if got, want := len(secondAllocs[0].DeviceIDs()), 2; got != want {
		t.Fatalf("second job got %d GPUs want %d", got, want)
	}
	waittest.NoErr(t, 5*time.Second, "blocked eval complete", func() (bool, error) {
		e, _, err := s.EvalGet(ctxT(t), evalDone.BlockedEval, nil)
		return err == nil && e.Status == structs.EvalStatusComplete, err
	})
}

func TestServer_JobRegisterInvalid(t *testing.T) {
	s := servertest.NewServer(t)
	cases := []struct {
		name string
		job  *structs.Job
	}{
		{"nil job", nil},
		{"bad driver", func() *structs.Job { j := statetest.Job(); j.TaskGroups[0].Tasks[0].Driver = "qemu"; return j }()},
		{"no groups", func() *structs.Job { j := statetest.Job(); j.TaskGroups = nil; return j }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.JobRegister(ctxT(t), tc.job)
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
		})
	}
	jobs, _, err := s.JobList(ctxT(t), nil)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("jobs %v %v, want none registered", jobs, err)
	}
}

func TestServer_RestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	cfg := servertest.Config(t, servertest.WithDataDir(dir))
	s, err := server.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := s.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	node := statetest.Node(4)
	if _, err := s.NodeRegister(ctx, node); err != nil {
		t.Fatal(err)
	}
	var jobIDs []string
	for i := 0; i < 3; i++ {
		j := statetest.BatchJob(1)
		if _, err := s.JobRegister(ctx, j); err != nil {
			t.Fatal(err)
		}
		jobIDs = append(jobIDs, j.ID)
	}
	for _, id := range jobIDs {
		runningAllocs(t, s, id, 1)
		waittest.NoErr(t, 5*time.Second, "evals of "+id+" terminal", func() (bool, error) {
			evals, _, err := s.JobEvaluations(ctx, id, nil)
			for _, e := range evals {
				if !e.TerminalStatus() {
					return false, err
				}
			}
			return len(evals) > 0, err
		})
	}
	before, err := s.State().Hash()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}

	s2 := servertest.Start(t, servertest.Config(t, servertest.WithDataDir(dir)))
	after, err := s2.State().Hash()
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Fatalf("state hash changed across restart: %s != %s", before, after)
	}
	for _, id := range jobIDs {
		if _, _, err := s2.JobGet(ctx, id, nil); err != nil {
			t.Fatalf("job %s after restart: %v", id, err)
		}
	}
}

func TestServer_BlockingQuery(t *testing.T) {
	s := servertest.NewServer(t)
	_, meta, err := s.JobList(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("timeout returns the current result", func(t *testing.T) {
		start := time.Now()
		jobs, m2, err := s.JobList(ctxT(t), &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: 100 * time.Millisecond})
		if err != nil || len(jobs) != 0 || m2.Index != meta.Index {
			t.Fatalf("jobs %v meta %+v err %v", jobs, m2, err)
		}
		if el := time.Since(start); el < 100*time.Millisecond || el > 5*time.Second {
			t.Fatalf("returned after %s, want about 100ms", el)
		}
	})

	t.Run("change wakes the query", func(t *testing.T) {
		job := statetest.Job()
		got := make(chan error, 1)
		var gotJobs []*structs.Job
		go func() {
			jobs, _, err := s.JobList(context.Background(), &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: 20 * time.Second})
			gotJobs = jobs
			got <- err
		}()
		time.Sleep(50 * time.Millisecond) // let the query start blocking; correctness does not depend on it
		if _, err := s.JobRegister(ctxT(t), job); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil || len(gotJobs) != 1 || gotJobs[0].ID != job.ID {
				t.Fatalf("jobs %v err %v", gotJobs, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("blocking query did not wake on change")
		}
	})

	t.Run("blocking get of a missing job is not found after the wait", func(t *testing.T) {
		_, _, err := s.JobGet(ctxT(t), "missing", &structs.QueryOptions{MinQueryIndex: 1_000_000, MaxQueryTime: 50 * time.Millisecond})
		if !errors.Is(err, structs.ErrNotFound) {
			t.Fatalf("err %v want ErrNotFound", err)
		}
	})
}

func TestServer_JobDeregisterStopsAllocs(t *testing.T) {
	s := servertest.NewServer(t)
	registerNode(t, s, 1)
	job := statetest.BatchJob(1)
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	runningAllocs(t, s, job.ID, 1)
	if _, err := s.JobDeregister(ctxT(t), "nope", false); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, err := s.JobDeregister(ctxT(t), job.ID, false); err != nil {
		t.Fatal(err)
	}
	runningAllocs(t, s, job.ID, 0)
	got, _, err := s.JobGet(ctxT(t), job.ID, nil)
	if err != nil || !got.Stop {
		t.Fatalf("job %+v %v: want stopped", got, err)
	}
}

func TestServer_HeartbeatMissMarksNodeDown(t *testing.T) {
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.MinHeartbeatTTL = 300 * time.Millisecond
		c.HeartbeatGrace = 300 * time.Millisecond
	}))
	n := statetest.Node(0)
	ttl, err := s.NodeRegister(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	if ttl < 300*time.Millisecond || ttl >= 600*time.Millisecond {
		t.Fatalf("ttl %s, want in [300ms, 600ms)", ttl)
	}
	// Heartbeats keep it ready.
	for i := 0; i < 5; i++ {
		if _, err := s.NodeUpdateStatus(ctxT(t), n.ID, structs.NodeStatusReady); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // well inside the TTL
	}
	got, _, err := s.NodeGet(ctxT(t), n.ID, nil)
	if err != nil || got.Status != structs.NodeStatusReady {
		t.Fatalf("node %+v %v: want ready while heartbeating", got, err)
	}
	waittest.NoErr(t, 5*time.Second, "node marked down", func() (bool, error) {
		got, _, err := s.NodeGet(ctxT(t), n.ID, nil)
		return err == nil && got.Status == structs.NodeStatusDown, err
	})
	if _, err := s.NodeUpdateStatus(ctxT(t), "missing", structs.NodeStatusReady); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
	if _, err := s.NodeUpdateStatus(ctxT(t), n.ID, "bogus"); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("bad status: %v", err)
	}
}

func TestServer_PrefixLookups(t *testing.T) {
	s := servertest.NewServer(t)
	node := registerNode(t, s, 4)
	var allocs []*structs.Allocation
	for i := 0; i < 3; i++ {
		job := statetest.BatchJob(1)
		if _, err := s.JobRegister(ctxT(t), job); err != nil {
			t.Fatal(err)
		}
		allocs = append(allocs, runningAllocs(t, s, job.ID, 1)...)
	}
	a := allocs[0]
	cases := []struct {
		name    string
		id      string
		wantErr error
		wantID  string
	}{
		{"full id", a.ID, nil, a.ID},
		{"unique prefix", a.ID[:8], nil, a.ID},
		{"too short", a.ID[:3], structs.ErrNotFound, ""},
		{"no match", "zzzzzzzz", structs.ErrNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := s.AllocGet(ctxT(t), tc.id, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.ID != tc.wantID {
				t.Fatalf("got %v %v", got, err)
			}
		})
	}
	got, _, err := s.NodeGet(ctxT(t), node.ID[:6], nil)
	if err != nil || got.ID != node.ID || got.SecretID != "" {
		t.Fatalf("node by prefix: %+v %v", got, err)
	}
}

// TestServer_RestartFromRaftSnapshot restarts a server whose state was
// partly compacted into a Raft snapshot: the FSM restores the snapshot and
// replays the remaining log to the same state.
func TestServer_RestartFromRaftSnapshot(t *testing.T) {
	dir := t.TempDir()
	withSnap := servertest.WithConfig(func(c *server.Config) {
		c.RaftSnapshotThreshold = 8
		c.RaftSnapshotInterval = 50 * time.Millisecond
	})
	s, err := server.NewServer(servertest.Config(t, servertest.WithDataDir(dir), withSnap))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := s.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := s.NodeRegister(ctx, statetest.Node(1)); err != nil {
			t.Fatal(err)
		}
	}
	// Raft snapshots on its own timer; wait until one exists.
	waittest.NoErr(t, 20*time.Second, "a raft snapshot", func() (bool, error) {
		return s.Stats()["raft.last_snapshot_index"] != "0", nil
	})
	before, err := s.State().Hash()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	s2 := servertest.Start(t, servertest.Config(t, servertest.WithDataDir(dir), withSnap))
	after, err := s2.State().Hash()
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Fatalf("state hash changed across snapshot restore")
	}
	nodes, _, err := s2.NodeList(ctx, nil)
	if err != nil || len(nodes) != 20 {
		t.Fatalf("nodes %d %v", len(nodes), err)
	}
}
