package server_test

import (
	"context"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// checkNoOvercommit fails the test when any GPU instance is held by two
// allocations or any node's CPU or memory is over-committed.
func checkNoOvercommit(t *testing.T, s *server.Server) {
	t.Helper()
	st := s.State()
	nodes, err := st.Nodes(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		allocs, err := st.AllocsByNode(nil, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		owner := map[string]string{}
		var cpu, mem int64
		for _, a := range allocs {
			if !a.HoldsResources() {
				continue
			}
			for _, tr := range a.AllocatedResources.Tasks {
				cpu += tr.CPU
				mem += tr.MemoryMB
			}
			for _, id := range a.DeviceIDs() {
				if prev, ok := owner[id]; ok {
					t.Fatalf("GPU %s on node %s held by %s and %s", id, n.Name, prev, a.ID)
				}
				owner[id] = a.ID
			}
		}
		if cpu > n.NodeResources.CPU-n.ReservedResources.CPU || mem > n.NodeResources.MemoryMB-n.ReservedResources.MemoryMB {
			t.Fatalf("node %s over-committed: cpu %d mem %d", n.Name, cpu, mem)
		}
	}
}

// TestServer_ConcurrentJobsNeverShareGPUs registers more GPU demand than
// the cluster has, from many goroutines, with four workers; it checks that
// no GPU is ever held twice, then completes running allocations until every
// job has run (blocked evaluations get placed as capacity frees).
func TestServer_ConcurrentJobsNeverShareGPUs(t *testing.T) {
	s := servertest.NewServer(t, servertest.WithSchedulers(4), servertest.WithConfig(func(c *server.Config) {
		c.MinHeartbeatTTL = 10 * time.Minute // the test sends no heartbeats
		c.FailedFollowUpDelay = 20 * time.Millisecond
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const nodes, gpusPerNode, jobs = 6, 4, 60
	for i := 0; i < nodes; i++ {
		if _, err := s.NodeRegister(ctx, statetest.Node(gpusPerNode)); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	jobIDs := make([]string, jobs)
	gpus := make([]int, jobs)
	for i := range jobIDs {
		jobIDs[i] = fmt.Sprintf("stress-%03d", i)
		gpus[i] = 1 + rng.IntN(3)
	}
	var wg sync.WaitGroup
	errCh := make(chan error, jobs)
	for i := range jobIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := statetest.BatchJob(gpus[i])
			j.ID, j.Name = jobIDs[i], jobIDs[i]
			if _, err := s.JobRegister(ctx, j); err != nil {
				errCh <- err
			}
		}()
	}
	wg.Wait()
	close(errCh)
	for err := range errCh {
		t.Fatalf("register: %v", err)
	}

	// Let the first wave settle: each job is placed or blocked.
	waittest.NoErr(t, 30*time.Second, "every job placed or blocked", func() (bool, error) {
		for _, id := range jobIDs {
			allocs, _, err := s.JobAllocations(ctx, id, nil)
			if err != nil || len(allocs) > 0 {
				continue
			}
			evals, _, err := s.JobEvaluations(ctx, id, nil)
			blocked := false
			for _, e := range evals {
				blocked = blocked || e.Status == structs.EvalStatusBlocked
			}
			if !blocked {
				return false, err
			}
		}
		return true, nil
	})
	checkNoOvercommit(t, s)

	done := map[string]bool{}
	deadline := time.Now().Add(15 * time.Second)
	for len(done) < jobs {
		if time.Now().After(deadline) {
			for _, id := range jobIDs {
				if !done[id] {
					evals, _, _ := s.JobEvaluations(ctx, id, nil)
					for _, e := range evals {
						t.Logf("job %s eval %s status %s trig %s desc %q blocked %s failed %v", id, e.ID, e.Status, e.TriggeredBy, e.StatusDescription, e.BlockedEval, e.FailedTGAllocs)
					}
				}
			}
			t.Fatalf("only %d of %d jobs ran; broker %v", len(done), jobs, s.Stats())
		}
		checkNoOvercommit(t, s)
		allocs, _, err := s.AllocList(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var finish []*structs.Allocation
		for _, a := range allocs {
			if a.DesiredStatus == structs.AllocDesiredStatusRun && !a.ClientTerminalStatus() {
				c := a.Copy()
				c.ClientStatus = structs.AllocClientStatusComplete
				finish = append(finish, c)
				done[a.JobID] = true
			}
		}
		if len(finish) > 0 {
			if err := s.UpdateAllocs(ctx, finish); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkNoOvercommit(t, s)
	all, _ := s.State().Evals(nil)
	summary := map[string]int{}
	for _, e := range all {
		summary[e.TriggeredBy+"/"+e.Status]++
	}
	t.Logf("evals: %v", summary)
	if st := s.Stats(); st["blocked.total_unblocked"] == "0" {
		t.Fatalf("no blocked evaluation was ever unblocked: %v", st)
	}
	// Every job placed exactly once: a completed batch allocation is never
	// replaced.
	for _, id := range jobIDs {
		allocs, _, err := s.JobAllocations(ctx, id, nil)
		if err != nil || len(allocs) != 1 {
			t.Fatalf("job %s has %d allocations (%v), want 1", id, len(allocs), err)
		}
		if got := len(allocs[0].DeviceIDs()); got != gpus[slicesIndex(jobIDs, id)] {
			t.Fatalf("job %s got %d GPUs", id, got)
		}
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
