package server

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// withEndpoint gives a the router port of the endpoint of its job and
// group.
func withEndpoint(a *structs.Allocation, name string, port int) *structs.Allocation {
	if a.AllocatedResources.Shared == nil {
		a.AllocatedResources.Shared = &structs.AllocatedSharedResources{}
	}
	a.AllocatedResources.Shared.Endpoint = &structs.AllocatedEndpoint{Name: name, Port: port, HostIP: "127.0.0.1"}
	return a
}

// ofGroup moves a to another job and group, so its endpoint is another.
func ofGroup(a *structs.Allocation, job, group string) *structs.Allocation {
	a.JobID, a.TaskGroup = job, group
	return a
}

// TestPlanApplierEndpointPorts forces plans past the scheduler: members of
// one endpoint share its port on a node; a second endpoint or a task port
// on it is refused, within one plan and against allocations already
// placed.
func TestPlanApplierEndpointPorts(t *testing.T) {
	cases := []struct {
		name       string
		setup      func(t *testing.T, f *planFixture) *structs.Plan
		wantOK     bool
		wantReason string
	}{
		{"three members share the port", func(t *testing.T, f *planFixture) *structs.Plan {
			p := &structs.Plan{EvalID: "e1"}
			for i := 0; i < 3; i++ {
				p.AppendAlloc(withEndpoint(withPorts(f.alloc(100, 100), port("http", 21000+i)), "llm", 9000))
			}
			return p
		}, true, ""},
		{"a member joins members already placed", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withEndpoint(f.alloc(100, 100), "llm", 9000), withEndpoint(f.alloc(100, 100), "llm", 9000))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withEndpoint(f.alloc(100, 100), "llm", 9000))
			return p
		}, true, ""},
		{"two endpoints on one port in one plan", func(t *testing.T, f *planFixture) *structs.Plan {
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withEndpoint(f.alloc(100, 100), "llm", 9000))
			p.AppendAlloc(withEndpoint(ofGroup(f.alloc(100, 100), "other", "g"), "llm-2", 9000))
			return p
		}, false, "port 9000: held by endpoint"},
		{"an endpoint on a port another endpoint holds", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withEndpoint(ofGroup(f.alloc(100, 100), "other", "g"), "llm-2", 9000))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withEndpoint(f.alloc(100, 100), "llm", 9000))
			return p
		}, false, "port 9000: held by endpoint"},
		{"another group of the same job", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withEndpoint(f.alloc(100, 100), "llm", 9000))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withEndpoint(ofGroup(f.alloc(100, 100), f.job.ID, "second"), "llm-b", 9000))
			return p
		}, false, "port 9000: held by endpoint"},
		{"a static task port on an endpoint's port", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withEndpoint(f.alloc(100, 100), "llm", 9000))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withPorts(ofGroup(f.alloc(100, 100), "web", "g"), port("http", 9000)))
			return p
		}, false, `endpoint "llm" of alloc`},
		{"an endpoint on a task's port", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withPorts(ofGroup(f.alloc(100, 100), "web", "g"), port("http", 9000)))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withEndpoint(f.alloc(100, 100), "llm", 9000))
			return p
		}, false, "collides with a port of alloc"},
		{"an endpoint port out of range", func(t *testing.T, f *planFixture) *structs.Plan {
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withEndpoint(f.alloc(100, 100), "llm", 70000))
			return p
		}, false, "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t, nil)
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
			res, err := evaluatePlan(snap, plan, nopLog{})
			if err != nil {
				t.Fatal(err)
			}
			if refused := len(res.RejectedNodes) == 1 && len(res.NodeAllocation) == 0; refused == tc.wantOK {
				t.Fatalf("evaluatePlan: rejected %v, accepted %v", res.RejectedNodes, res.NodeAllocation)
			}
		})
	}
}

// TestEvaluatePlan_EndpointMoveAllOrNothing: a plan that moves an
// endpoint's members (stops on one node, placements on another) commits
// neither part when the new node is refused, so the old members keep
// serving; other jobs' stops in the plan still commit.
func TestEvaluatePlan_EndpointMoveAllOrNothing(t *testing.T) {
	f := newPlanFixture(t, nil)
	other := statetest.Node(1)
	other.ID = "other-node"
	if err := f.store.UpsertNode(f.next(), other); err != nil {
		t.Fatal(err)
	}
	old1 := withEndpoint(f.alloc(100, 100), "llm", 9000)
	old2 := withEndpoint(f.alloc(100, 100), "llm", 9000)
	unrelated := ofGroup(f.alloc(100, 100), "web", "g")
	f.existing(t, old1, old2, unrelated)
	// The new node already has another endpoint on 9000: refused.
	blocker := withEndpoint(ofGroup(statetest.Alloc(f.job, other), "other", "g"), "llm-2", 9000)
	f.existing(t, blocker)
	plan := &structs.Plan{EvalID: "e1"}
	plan.AppendStoppedAlloc(old1, "endpoint moves")
	plan.AppendStoppedAlloc(old2, "endpoint moves")
	plan.AppendStoppedAlloc(unrelated, "job stopped")
	for i := 0; i < 2; i++ {
		plan.AppendAlloc(withEndpoint(statetest.Alloc(f.job, other), "llm", 9000))
	}
	snap, err := f.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	res, err := evaluatePlan(snap, plan, nopLog{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodeAllocation) != 0 || res.RefreshIndex == 0 {
		t.Fatalf("placements committed %v, refresh %d", res.NodeAllocation, res.RefreshIndex)
	}
	stops := res.NodeUpdate[f.node.ID]
	if len(stops) != 1 || stops[0].ID != unrelated.ID {
		t.Fatalf("stops committed %v, want only the unrelated one", stops)
	}
}
