package fsm

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// bigState fills tf with 10,000 nodes of 8 GPUs, 2,000 batch jobs of 100
// one-GPU allocations each (200,000 allocations, placed 100 to a plan as
// the plan applier commits them) and, when finished, marks every
// allocation complete with a task state of three events, as clients
// report them. It returns the number of allocations.
func bigState(b *testing.B, tf *testFSM, finished bool) int {
	return fleetState(b, tf, 2000, finished)
}

// fleetState is bigState with jobs jobs of 100 allocations.
func fleetState(b *testing.B, tf *testFSM, jobs int, finished bool) int {
	b.Helper()
	st := tf.State()
	index := uint64(1)
	nodes := make([]*structs.Node, 10000)
	for i := range nodes {
		nodes[i] = statetest.Node(8)
		index++
		if err := st.UpsertNode(index, nodes[i]); err != nil {
			b.Fatal(err)
		}
	}
	total := 0
	for j := 0; j < jobs; j++ {
		job := statetest.BatchJob(1)
		job.TaskGroups[0].Count = 100
		job.TaskGroups[0].Tasks[0].Env = map[string]string{"EPOCHS": "10", "DATASET": "s3://bucket/imagenet"}
		index++
		if err := st.UpsertJob(index, job); err != nil {
			b.Fatal(err)
		}
		stored, _ := st.JobByID(nil, job.ID)
		req := &structs.ApplyPlanResultsRequest{Job: stored, UpdatedAt: int64(index)}
		for k := 0; k < 100; k++ {
			a := statetest.Alloc(stored, nodes[(j*100+k)%len(nodes)])
			a.Name = structs.AllocName(job.ID, "web", k)
			a.Job = nil
			req.AllocsPlaced = append(req.AllocsPlaced, a)
		}
		index++
		if err := st.UpsertPlanResults(index, req); err != nil {
			b.Fatal(err)
		}
		total += len(req.AllocsPlaced)
		if !finished {
			continue
		}
		var done []*structs.Allocation
		for _, a := range req.AllocsPlaced {
			done = append(done, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusComplete,
				TaskStates: map[string]*structs.TaskState{"server": {State: "dead", StartedAt: 1, FinishedAt: 2, Events: []*structs.TaskEvent{
					{Type: "Received", Time: 1}, {Type: "Started", Time: 2}, {Type: "Terminated", Time: 3, Details: map[string]string{"exit_code": "0"}}}}}})
		}
		index++
		if err := st.UpdateAllocsFromClient(index, done, int64(index)); err != nil {
			b.Fatal(err)
		}
	}
	return total
}

// processCPU is the CPU time this process has used (user and system): on
// a loaded machine, wall time says more about the neighbours.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fileSink is a raft.SnapshotSink writing a file (Close syncs it, as
// Raft's file snapshot store does).
type fileSink struct{ *os.File }

func (s *fileSink) ID() string { return "bench" }
func (s *fileSink) Close() error {
	if err := s.File.Sync(); err != nil {
		return err
	}
	return s.File.Close()
}
func (s *fileSink) Cancel() error { return s.File.Close() }

// BenchmarkSnapshot200kAllocs persists and restores the FSM snapshot of a
// state of 10,000 nodes, 2,000 jobs and 200,000 finished allocations (see
// bigState) into a file (synced) and restores it from there. It reports
// the seconds to persist (snapshot-s, and the CPU seconds it took,
// snapshot-cpu-s, both cores together), to restore (restore-s) and the
// snapshot's size in MiB; the goal is under 5 s to persist.
func BenchmarkSnapshot200kAllocs(b *testing.B) {
	tf := newTestFSM(b)
	n := bigState(b, tf, true)
	if n != 200000 {
		b.Fatalf("%d allocations", n)
	}
	var persist, persistCPU, restore time.Duration
	var size int64
	path := filepath.Join(b.TempDir(), "state.bin")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Into a file, as Raft's file snapshot store persists it.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), processCPU()
		snap, err := tf.RaftFSM().Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(&fileSink{File: f}); err != nil {
			b.Fatal(err)
		}
		persist += time.Since(start)
		persistCPU += processCPU() - cpu0
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
		rf, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if err := tf.RaftFSM().Restore(rf); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(start)
	}
	b.StopTimer()
	allocs, err := tf.State().Allocs(nil)
	if err != nil || len(allocs) != n {
		b.Fatalf("restored %d allocations, want %d (%v)", len(allocs), n, err)
	}
	for _, a := range allocs[:10] {
		if a.Job == nil || a.Job.ID != a.JobID {
			b.Fatalf("restored allocation %s without its job", a.ID)
		}
	}
	b.ReportMetric(persist.Seconds()/float64(b.N), "snapshot-s")
	b.ReportMetric(persistCPU.Seconds()/float64(b.N), "snapshot-cpu-s")
	b.ReportMetric(restore.Seconds()/float64(b.N), "restore-s")
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

// BenchmarkApplyClientUpdate applies one client status update (8
// allocations of one job reported running, as one node reports a plan's
// placements) through the FSM on a state of 10,000 nodes and 100,000
// allocations: the Raft entry a fleet sends most.
func BenchmarkApplyClientUpdate(b *testing.B) {
	tf := newTestFSM(b)
	fleetState(b, tf, 1000, false)
	allocs, err := tf.State().Allocs(nil)
	if err != nil {
		b.Fatal(err)
	}
	index, _ := tf.State().LatestIndex()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := &structs.AllocClientUpdateRequest{UpdatedAt: int64(i)}
		for k := 0; k < 8; k++ {
			a := allocs[(i*8+k)%len(allocs)]
			req.Allocs = append(req.Allocs, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning,
				TaskStates: map[string]*structs.TaskState{"server": {State: "running", StartedAt: 1, Events: []*structs.TaskEvent{{Type: "Started", Time: 1}}}}})
		}
		index++
		if resp := tf.applyMsg(b, index, structs.AllocClientUpdateRequestType, req); resp != nil {
			b.Fatal(resp)
		}
	}
}
