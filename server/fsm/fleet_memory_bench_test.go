package fsm

import (
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// applyFleet builds, through encoded Raft entries as the leader writes
// them, the state of the node simulator's fleet: 10,000 nodes of 8 GPUs,
// jobs batch jobs of 100 one-GPU allocations (register with its
// evaluation, one plan of 100 placements carrying the job once), each
// allocation reported running and then complete with three task events,
// 100 to an entry as the server's update batcher applies them.
func applyFleet(b *testing.B, tf *testFSM, jobs int) uint64 {
	b.Helper()
	index := uint64(1)
	nodes := make([]*structs.Node, 10000)
	for i := range nodes {
		nodes[i] = statetest.Node(8)
		index++
		tf.applyMsg(b, index, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: nodes[i]})
	}
	for j := 0; j < jobs; j++ {
		job := statetest.BatchJob(1)
		job.TaskGroups[0].Count = 100
		ev := &structs.Evaluation{ID: structs.GenerateUUID(), Namespace: job.Namespace, JobID: job.ID, Type: job.Type,
			TriggeredBy: "job-register", Status: structs.EvalStatusPending, Priority: job.Priority}
		index++
		if r := tf.applyMsg(b, index, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: ev}); r != nil {
			b.Fatalf("register: %v", r)
		}
		stored, _ := tf.State().JobByID(nil, job.ID)
		req := &structs.ApplyPlanResultsRequest{Job: stored, EvalID: ev.ID, UpdatedAt: int64(index)}
		for k := 0; k < 100; k++ {
			a := statetest.Alloc(stored, nodes[(j*100+k)%len(nodes)])
			a.Name = structs.AllocName(job.ID, "web", k)
			a.EvalID = ev.ID
			a.Job = nil
			req.AllocsPlaced = append(req.AllocsPlaced, a)
		}
		index++
		if r := tf.applyMsg(b, index, structs.ApplyPlanResultsRequestType, req); r != nil {
			b.Fatalf("plan: %v", r)
		}
		for _, status := range []string{structs.AllocClientStatusRunning, structs.AllocClientStatusComplete} {
			upd := &structs.AllocClientUpdateRequest{UpdatedAt: int64(index)}
			for _, a := range req.AllocsPlaced {
				ts := &structs.TaskState{State: "running", StartedAt: 1, Events: []*structs.TaskEvent{{Type: "Received", Time: 1}, {Type: "Started", Time: 2}}}
				if status == structs.AllocClientStatusComplete {
					ts = &structs.TaskState{State: "dead", StartedAt: 1, FinishedAt: 2, Events: []*structs.TaskEvent{
						{Type: "Received", Time: 1}, {Type: "Started", Time: 2}, {Type: "Terminated", Time: 3, Details: map[string]string{"exit_code": "0"}}}}
				}
				upd.Allocs = append(upd.Allocs, &structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: status,
					TaskStates: map[string]*structs.TaskState{"server": ts}})
			}
			index++
			if r := tf.applyMsg(b, index, structs.AllocClientUpdateRequestType, upd); r != nil {
				b.Fatalf("client update: %v", r)
			}
		}
	}
	return index
}

// BenchmarkFleetHeap reports the live heap (after a full GC) of an FSM
// holding the node simulator's end state, 10,000 nodes and 100,000
// finished allocations (applyFleet), event buffer included: heap-MiB, the
// part of the server's RSS that the state is. Run with -memprofile and
// -memprofilerate=4096 and GPULAYER_FLEET_HEAP_PROFILE=FILE to get the
// heap profile taken while the state is live (-memprofile's is written
// after it is freed).
func BenchmarkFleetHeap(b *testing.B) {
	for i := 0; i < b.N; i++ {
		tf := newTestFSM(b)
		applyFleet(b, tf, 1000)
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
		if path := os.Getenv("GPULAYER_FLEET_HEAP_PROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		runtime.KeepAlive(tf)
	}
}
