package server

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// planStore returns a store with a 2-GPU node "gpu", a 2-GPU node
// reserving "voice" and an opportunistic 2-GPU node.
func planStore(t *testing.T) (*state.StateStore, *structs.Node) {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	plain := statetest.Node(2)
	voice := statetest.Node(2)
	voice.Reserved = []string{"voice"}
	opp := statetest.Node(2)
	opp.Availability = structs.AvailabilityOpportunistic
	for i, n := range []*structs.Node{plain, voice, opp} {
		if err := st.UpsertNode(uint64(10+i), n); err != nil {
			t.Fatal(err)
		}
	}
	return st, plain
}

func TestJobPlan(t *testing.T) {
	t.Run("new job, part waits, reasons per node", func(t *testing.T) {
		st, plain := planStore(t)
		snap, _ := st.Snapshot()
		before, _ := snap.LatestIndex()
		job := statetest.BatchJob(1)
		job.TaskGroups[0].Count = 3
		resp, err := planJob(snap, job)
		if err != nil {
			t.Fatal(err)
		}
		g := resp.Groups[0]
		if g.Place != 2 || g.Queued != 1 || g.Nodes[plain.Name] != 2 || resp.JobModifyIndex != 0 {
			t.Fatalf("group plan %+v", g)
		}
		want := "1 node: not enough free devices (nvidia/gpu); 1: opportunistic node; 1: reserved 'voice'"
		if g.Failure == nil || g.Failure.Explain() != want {
			t.Fatalf("failure %q, want %q", g.Failure.Explain(), want)
		}
		if len(resp.Diff) == 0 || !strings.HasPrefix(resp.Diff[0], "+ ") {
			t.Fatalf("new job diff %v, want additions", resp.Diff)
		}
		after, _ := st.LatestIndex()
		if after != before {
			t.Fatalf("plan wrote to the state: index %d -> %d", before, after)
		}
		allocs, _ := st.Allocs(nil)
		if len(allocs) != 0 {
			t.Fatalf("plan created %d allocations", len(allocs))
		}
	})
	t.Run("running job: meta change is in place, count change places more", func(t *testing.T) {
		st, plain := planStore(t)
		job := statetest.BatchJob(1)
		if err := st.UpsertJob(20, job); err != nil {
			t.Fatal(err)
		}
		stored, _ := st.JobByID(nil, job.ID)
		a := statetest.Alloc(stored, plain)
		if err := st.UpsertPlanResults(21, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}, EvalID: "e"}); err != nil {
			t.Fatal(err)
		}
		snap, _ := st.Snapshot()
		same, err := planJob(snap, stored.Copy())
		if err != nil {
			t.Fatal(err)
		}
		if len(same.Diff) != 0 || same.Groups[0].Place+same.Groups[0].InPlace+same.Groups[0].Stop != 0 {
			t.Fatalf("unchanged job: diff %v groups %+v", same.Diff, same.Groups[0])
		}
		meta := stored.Copy()
		meta.Meta = map[string]string{"owner": "ml"}
		resp, err := planJob(snap, meta)
		if err != nil {
			t.Fatal(err)
		}
		if g := resp.Groups[0]; g.InPlace != 1 || g.Place != 0 || g.Stop != 0 {
			t.Fatalf("meta change: %+v", g)
		}
		if len(resp.Diff) != 1 || resp.Diff[0] != `+ Meta.owner = "ml"` {
			t.Fatalf("diff %v", resp.Diff)
		}
		more := stored.Copy()
		more.TaskGroups[0].Count = 2
		resp, err = planJob(snap, more)
		if err != nil {
			t.Fatal(err)
		}
		if g := resp.Groups[0]; g.Place != 1 || g.InPlace != 1 {
			t.Fatalf("count change: %+v", g)
		}
		if len(resp.Diff) != 1 || resp.Diff[0] != `~ TaskGroups["web"].Count: 1 => 2` {
			t.Fatalf("diff %v", resp.Diff)
		}
	})
}

func TestJobQueue(t *testing.T) {
	st, _ := planStore(t)
	mk := func(id string, prio int, submit int64, status string, index uint64) {
		job := statetest.BatchJob(1)
		job.ID, job.Priority, job.SubmitTime = id, prio, submit
		if err := st.UpsertJob(index, job); err != nil {
			t.Fatal(err)
		}
		e := statetest.Eval(job)
		e.Status = status
		if status == structs.EvalStatusBlocked {
			e.QueuedAllocations = map[string]int{"web": 1}
			e.FailedTGAllocs = map[string]*structs.AllocMetric{"web": {NodesEvaluated: 3, DimensionExhausted: map[string]int{"devices: nvidia/gpu": 3}}}
		}
		if err := st.UpsertEvals(index+1, []*structs.Evaluation{e}); err != nil {
			t.Fatal(err)
		}
	}
	mk("late-high", 80, 300, structs.EvalStatusBlocked, 30)
	mk("early-mid", 50, 100, structs.EvalStatusBlocked, 32)
	mk("late-mid", 50, 200, structs.EvalStatusPending, 34)
	mk("done", 90, 50, structs.EvalStatusComplete, 36)
	q, err := jobQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range q {
		got = append(got, e.JobID+":"+e.Status)
	}
	want := "late-high:blocked early-mid:blocked late-mid:pending"
	if strings.Join(got, " ") != want {
		t.Fatalf("queue %v, want %s", got, want)
	}
	if q[0].Queued["web"] != 1 || q[0].Reasons["web"] != "3 nodes: not enough free devices (nvidia/gpu)" {
		t.Fatalf("entry %+v", q[0])
	}
	if q[2].Reasons["web"] != "waiting for a scheduler" {
		t.Fatalf("pending entry %+v", q[2])
	}
}
