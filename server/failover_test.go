package server_test

import (
	"context"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// heartbeatLoop heartbeats node on s every period until the returned stop
// function is called.
func heartbeatLoop(t *testing.T, s *server.Server, nodeID string, period time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				// Errors (a leadership change) are retried on the next tick.
				_, _ = s.NodeUpdateStatus(ctx, nodeID, structs.NodeStatusReady)
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// TestServer_DownNodeAllocsLostAndReplaced: a node that stops heartbeating
// is marked down, its allocation is told to stop and marked lost, and a
// replacement runs on the other node; when the node comes back its old
// allocation stays stopped, so the count = 1 job runs once.
func TestServer_DownNodeAllocsLostAndReplaced(t *testing.T) {
	for _, jobType := range []string{structs.JobTypeService, structs.JobTypeBatch} {
		t.Run(jobType, func(t *testing.T) {
			s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
				c.MinHeartbeatTTL = 200 * time.Millisecond
				c.HeartbeatGrace = 200 * time.Millisecond
			}))
			a := statetest.Node(0)
			a.Name = "node-a"
			if _, err := s.NodeRegister(ctxT(t), a); err != nil {
				t.Fatal(err)
			}
			stopA := heartbeatLoop(t, s, a.ID, 50*time.Millisecond)
			job := statetest.Job()
			if jobType == structs.JobTypeBatch {
				job = statetest.BatchJob(0)
			}
			if _, err := s.JobRegister(ctxT(t), job); err != nil {
				t.Fatal(err)
			}
			first := runningAllocs(t, s, job.ID, 1)[0]
			if first.NodeID != a.ID {
				t.Fatalf("first allocation on %s, want node-a", first.NodeID)
			}
			b := statetest.Node(0)
			b.Name = "node-b"
			if _, err := s.NodeRegister(ctxT(t), b); err != nil {
				t.Fatal(err)
			}
			stopB := heartbeatLoop(t, s, b.ID, 50*time.Millisecond)
			defer stopB()

			stopA() // node-a goes silent
			waittest.NoErr(t, 10*time.Second, "replacement on node-b", func() (bool, error) {
				allocs, _, err := s.JobAllocations(ctxT(t), job.ID, nil)
				if err != nil {
					return false, err
				}
				var lost, replaced bool
				for _, al := range allocs {
					switch {
					case al.ID == first.ID:
						lost = al.ClientStatus == structs.AllocClientStatusLost && al.DesiredStatus == structs.AllocDesiredStatusStop
					case al.NodeID == b.ID && al.DesiredStatus == structs.AllocDesiredStatusRun:
						replaced = true
					}
				}
				return lost && replaced, nil
			})
			n, _, err := s.NodeGet(ctxT(t), a.ID, nil)
			if err != nil || n.Status != structs.NodeStatusDown {
				t.Fatalf("node-a %+v %v: want down", n, err)
			}

			// node-a comes back: what its client sees tells it to stop.
			back := a.Copy()
			back.Status = structs.NodeStatusInit
			if _, err := s.NodeRegister(ctxT(t), back); err != nil {
				t.Fatal(err)
			}
			defer heartbeatLoop(t, s, a.ID, 50*time.Millisecond)()
			onA, _, err := s.NodeAllocations(ctxT(t), a.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, al := range onA {
				if al.DesiredStatus != structs.AllocDesiredStatusStop {
					t.Errorf("allocation %s on the returned node desires %q, want stop", al.ID, al.DesiredStatus)
				}
			}
			if got := runningAllocs(t, s, job.ID, 1); got[0].NodeID != b.ID {
				t.Fatalf("running allocation on %s, want node-b only", got[0].NodeID)
			}
		})
	}
}

// TestCluster_FailoverRestoresLeaderState kills the leader and checks that
// the new one rebuilt the blocked evaluations (a blocked GPU job is placed
// once capacity arrives) and gave every node the failover TTL (a node that
// heartbeated only the old leader is not marked down by the election).
func TestCluster_FailoverRestoresLeaderState(t *testing.T) {
	c := servertest.NewCluster(t, 3, servertest.WithConfig(func(cfg *server.Config) {
		cfg.MinHeartbeatTTL = 100 * time.Millisecond
		cfg.HeartbeatGrace = 100 * time.Millisecond
	}))
	l := c.WaitForLeader()
	small := statetest.Node(0)
	if _, err := c.Server(l).NodeRegister(ctxT(t), small); err != nil {
		t.Fatal(err)
	}
	stop := heartbeatLoop(t, c.Server(l), small.ID, 30*time.Millisecond)
	job := statetest.BatchJob(2)
	c.Register(job)
	waittest.NoErr(t, 10*time.Second, "blocked evaluation", func() (bool, error) {
		return c.Server(l).Stats()["blocked.total_blocked"] == "1", nil
	})
	// Heartbeat until the leader is gone, so only the election, not a
	// missed heartbeat, could mark the node down.
	c.Kill(l)
	stop()
	nl := c.WaitForLeader()
	leader := c.Server(nl)
	waittest.NoErr(t, 10*time.Second, "blocked eval and heartbeat timer restored", func() (bool, error) {
		st := leader.Stats()
		return st["blocked.total_blocked"] == "1" && st["heartbeat.timers"] == "1", nil
	})
	// Five TTLs plus grace: on the short TTL the node would be down by now.
	time.Sleep(time.Second)
	n, err := leader.State().NodeByID(nil, small.ID)
	if err != nil || n == nil || n.Status != structs.NodeStatusReady {
		t.Fatalf("node after failover: %+v %v, want ready (failover TTL)", n, err)
	}

	gpu := statetest.Node(2)
	if _, err := leader.NodeRegister(ctxT(t), gpu); err != nil {
		t.Fatal(err)
	}
	defer heartbeatLoop(t, leader, gpu.ID, 30*time.Millisecond)()
	allocs := runningAllocs(t, leader, job.ID, 1)
	if allocs[0].NodeID != gpu.ID || len(allocs[0].DeviceIDs()) != 2 {
		t.Fatalf("allocation %+v: want on the GPU node with 2 devices", allocs[0])
	}
	c.Restart(l)
	c.WaitForConvergence(convergeTimeout)
}

// BenchmarkRaftApply registers jobs on the leader of three in-memory
// servers (BoltDB log stores on disk, so every commit is fsynced) with 1
// and 64 concurrent writers, and reports jobs/s and latency percentiles.
func BenchmarkRaftApply(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run("writers="+strconv.Itoa(writers), func(b *testing.B) {
			c := servertest.NewCluster(b, 3, servertest.WithSchedulers(1))
			leader := c.Server(c.WaitForLeader())
			lat := make([]time.Duration, b.N)
			var next sync.Mutex
			i := 0
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						next.Lock()
						n := i
						i++
						next.Unlock()
						if n >= b.N {
							return
						}
						job := statetest.Job()
						t0 := time.Now()
						if _, err := leader.JobRegister(context.Background(), job); err != nil {
							b.Error(err)
							return
						}
						lat[n] = time.Since(t0)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		})
	}
}

// percentiles returns the 50th and 99th percentile of d (nearest rank).
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return s[(len(s)-1)*50/100], s[(len(s)-1)*99/100]
}
