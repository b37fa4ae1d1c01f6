package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// planFixture is a state with one 2-GPU node and helpers to build
// allocations on it.
type planFixture struct {
	store *state.StateStore
	node  *structs.Node
	job   *structs.Job
	gpus  []string
	index uint64
}

func newPlanFixture(t *testing.T, mutateNode func(*structs.Node)) *planFixture {
	t.Helper()
	store, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	node := statetest.Node(2)
	if mutateNode != nil {
		mutateNode(node)
	}
	f := &planFixture{store: store, node: node, job: statetest.BatchJob(1), gpus: node.NodeResources.Devices[0].HealthyInstances(), index: 10}
	if err := store.UpsertNode(f.next(), node); err != nil {
		t.Fatal(err)
	}
	if err := store.UpsertJob(f.next(), f.job); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *planFixture) next() uint64 { f.index++; return f.index }

// alloc returns an allocation on the node with cpu MHz, mem MiB and the
// given device instances.
func (f *planFixture) alloc(cpu, mem int64, devs ...string) *structs.Allocation {
	a := statetest.Alloc(f.job, f.node)
	tr := a.AllocatedResources.Tasks["server"]
	tr.CPU, tr.MemoryMB = cpu, mem
	tr.Devices = nil
	if len(devs) > 0 {
		g := f.node.NodeResources.Devices[0]
		tr.Devices = []*structs.AllocatedDeviceResource{{Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: devs}}
	}
	return a
}

// existing commits allocs as already placed.
func (f *planFixture) existing(t *testing.T, allocs ...*structs.Allocation) {
	t.Helper()
	if err := f.store.UpsertPlanResults(f.next(), &structs.ApplyPlanResultsRequest{AllocsPlaced: allocs, EvalID: "e"}); err != nil {
		t.Fatal(err)
	}
}

func TestEvaluateNodePlan(t *testing.T) {
	type setup func(t *testing.T, f *planFixture) *structs.Plan
	place := func(allocs ...*structs.Allocation) *structs.Plan {
		p := &structs.Plan{EvalID: "e1"}
		for _, a := range allocs {
			p.AppendAlloc(a)
		}
		return p
	}
	cases := []struct {
		name       string
		mutateNode func(*structs.Node)
		setup      setup
		wantOK     bool
		wantReason string
	}{
		{"healthy fit", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, f.alloc(1000, 1024, f.gpus[0]))
			return place(f.alloc(1000, 1024, f.gpus[1]))
		}, true, ""},
		{"gpu instance given twice across allocs", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, f.alloc(1000, 1024, f.gpus[0]))
			return place(f.alloc(1000, 1024, f.gpus[0]))
		}, false, "given to both"},
		{"gpu instance given twice in one plan", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 100, f.gpus[1]), f.alloc(100, 100, f.gpus[1]))
		}, false, "given to both"},
		{"cpu over", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, f.alloc(15000, 1024))
			return place(f.alloc(1000, 1024))
		}, false, "cpu"},
		{"cpu exactly full fits", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, f.alloc(15000, 1024))
			return place(f.alloc(900, 1024))
		}, true, ""},
		{"memory over", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 65281))
		}, false, "memory"},
		{"stopped but not client-terminal alloc still holds its gpu", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			old := f.alloc(1000, 1024, f.gpus[0])
			f.existing(t, old)
			p := place(f.alloc(1000, 1024, f.gpus[0]))
			p.AppendStoppedAlloc(old, "job stopped")
			return p
		}, false, "given to both"},
		{"client-terminal alloc frees its gpu", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			old := f.alloc(1000, 1024, f.gpus[0])
			f.existing(t, old)
			done := old.Copy()
			done.ClientStatus = structs.AllocClientStatusComplete
			if err := f.store.UpdateAllocsFromClient(f.next(), []*structs.Allocation{done}, 1); err != nil {
				t.Fatal(err)
			}
			return place(f.alloc(1000, 1024, f.gpus[0]))
		}, true, ""},
		{"plan's update of an existing alloc replaces it", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			old := f.alloc(15000, 1024, f.gpus[0])
			f.existing(t, old)
			smaller := old.Copy()
			smaller.AllocatedResources.Tasks["server"].CPU = 100
			return place(smaller, f.alloc(1000, 1024, f.gpus[1]))
		}, true, ""},
		{"unknown device instance", nil, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 100, "GPU-nope"))
		}, false, "no such instance"},
		{"unhealthy device instance", func(n *structs.Node) { n.NodeResources.Devices[0].Instances[1].Healthy = false }, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 100, f.node.NodeResources.Devices[0].Instances[1].ID))
		}, false, "unhealthy"},
		{"node down", func(n *structs.Node) { n.Status = structs.NodeStatusDown }, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 100))
		}, false, "node down"},
		{"node ineligible", func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible }, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 100))
		}, false, "node ineligible"},
		{"node draining", func(n *structs.Node) {
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
			n.DrainStrategy = &structs.DrainStrategy{}
		}, func(t *testing.T, f *planFixture) *structs.Plan {
			return place(f.alloc(100, 100))
		}, false, "node ineligible (draining)"},
		{"stops only always fit", func(n *structs.Node) { n.Status = structs.NodeStatusDown }, func(t *testing.T, f *planFixture) *structs.Plan {
			old := f.alloc(1000, 1024, f.gpus[0])
			f.existing(t, old)
			p := &structs.Plan{EvalID: "e1"}
			p.AppendStoppedAlloc(old, "job stopped")
			return p
		}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t, tc.mutateNode)
			plan := tc.setup(t, f)
			snap, err := f.store.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			ok, reason, err := evaluateNodePlan(snap, plan, f.node.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK || !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("ok=%v reason=%q, want ok=%v reason containing %q", ok, reason, tc.wantOK, tc.wantReason)
			}
		})
	}
	t.Run("missing node", func(t *testing.T) {
		f := newPlanFixture(t, nil)
		snap, _ := f.store.Snapshot()
		plan := &structs.Plan{NodeAllocation: map[string][]*structs.Allocation{"other": {f.alloc(1, 1)}}}
		ok, reason, err := evaluateNodePlan(snap, plan, "other")
		if err != nil || ok || !strings.Contains(reason, "does not exist") {
			t.Fatalf("ok=%v reason=%q err=%v", ok, reason, err)
		}
	})
}

type nopLog struct{}

func (nopLog) Debug(string, ...interface{}) {}

func TestEvaluatePlan_PartialCommit(t *testing.T) {
	f := newPlanFixture(t, nil)
	other := statetest.Node(1)
	if err := f.store.UpsertNode(f.next(), other); err != nil {
		t.Fatal(err)
	}
	f.existing(t, f.alloc(100, 100, f.gpus[0]))
	good := statetest.Alloc(f.job, other)
	plan := &structs.Plan{EvalID: "e1"}
	plan.AppendAlloc(f.alloc(100, 100, f.gpus[0])) // conflicts
	plan.AppendAlloc(good)
	snap, _ := f.store.Snapshot()
	res, err := evaluatePlan(snap, plan, nopLog{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RejectedNodes) != 1 || res.RejectedNodes[0] != f.node.ID || res.RefreshIndex != f.index {
		t.Fatalf("rejected %v refresh %d, want [%s] at %d", res.RejectedNodes, res.RefreshIndex, f.node.ID, f.index)
	}
	if len(res.NodeAllocation[other.ID]) != 1 || len(res.NodeAllocation[f.node.ID]) != 0 {
		t.Fatalf("accepted %v", res.NodeAllocation)
	}
	if full, exp, act := res.FullCommit(plan); full || exp != 2 || act != 1 {
		t.Fatalf("FullCommit = %v %d %d", full, exp, act)
	}
}

func TestPlanQueue(t *testing.T) {
	q := NewPlanQueue()
	if _, err := q.Enqueue(&structs.Plan{}, "t"); !errors.Is(err, structs.ErrNotLeader) {
		t.Fatalf("disabled enqueue: %v", err)
	}
	q.SetEnabled(true)
	low, _ := q.Enqueue(&structs.Plan{EvalID: "low", Priority: 10}, "t")
	_, _ = q.Enqueue(&structs.Plan{EvalID: "high", Priority: 90}, "t")
	_, _ = q.Enqueue(&structs.Plan{EvalID: "high2", Priority: 90}, "t")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, want := range []string{"high", "high2"} {
		p, err := q.Dequeue(ctx)
		if err != nil || p.plan.EvalID != want {
			t.Fatalf("dequeued %v %v want %s", p, err, want)
		}
		p.respond(&structs.PlanResult{AllocIndex: 7}, nil)
	}
	q.SetEnabled(false)
	if _, err := low.Wait(ctx); !errors.Is(err, structs.ErrNotLeader) {
		t.Fatalf("flushed plan: %v", err)
	}
}

// TestEvaluatePlanOverlay: a plan is checked against the allocations of
// the plans still in flight (committed, maybe not applied) as well as the
// state, so the pipelined applier never gives a GPU twice; an allocation
// both in flight and already in the state counts once.
func TestEvaluatePlanOverlay(t *testing.T) {
	f := newPlanFixture(t, nil)
	inflight := f.alloc(100, 100, f.gpus[0])
	overlay := map[string][]*structs.Allocation{f.node.ID: {inflight}}
	snap, _ := f.store.Snapshot()

	same := &structs.Plan{EvalID: "e2"}
	same.AppendAlloc(f.alloc(100, 100, f.gpus[0]))
	res, err := evaluatePlanOverlay(snap, same, overlay, nopLog{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RejectedNodes) != 1 || len(res.NodeAllocation) != 0 {
		t.Fatalf("GPU %s of a plan in flight given again: rejected %v, placed %v", f.gpus[0], res.RejectedNodes, res.NodeAllocation)
	}
	// Without the overlay the same plan fits: the state does not hold the
	// plan in flight yet.
	if res, err := evaluatePlan(snap, same, nopLog{}); err != nil || len(res.RejectedNodes) != 0 {
		t.Fatalf("without overlay: rejected %v, err %v", res.RejectedNodes, err)
	}

	other := &structs.Plan{EvalID: "e3"}
	other.AppendAlloc(f.alloc(100, 100, f.gpus[1]))
	if res, err := evaluatePlanOverlay(snap, other, overlay, nopLog{}); err != nil || len(res.RejectedNodes) != 0 || len(res.NodeAllocation[f.node.ID]) != 1 {
		t.Fatalf("free GPU %s: rejected %v placed %v err %v", f.gpus[1], res.RejectedNodes, res.NodeAllocation, err)
	}

	// Once applied, the in-flight allocation is in the state too: counted
	// once, the other GPU still fits.
	f.existing(t, inflight)
	snap, _ = f.store.Snapshot()
	if res, err := evaluatePlanOverlay(snap, other, overlay, nopLog{}); err != nil || len(res.RejectedNodes) != 0 {
		t.Fatalf("allocation in state and overlay counted twice: rejected %v err %v", res.RejectedNodes, err)
	}
}
