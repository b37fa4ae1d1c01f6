package server

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// withPorts gives a the host ports (label=port pairs).
func withPorts(a *structs.Allocation, ports ...structs.AllocatedPortMapping) *structs.Allocation {
	a.AllocatedResources.Shared = &structs.AllocatedSharedResources{Ports: ports}
	return a
}

func port(label string, v int) structs.AllocatedPortMapping {
	return structs.AllocatedPortMapping{Label: label, Value: v, HostIP: "127.0.0.1"}
}

// TestPlanApplierRefusesHostPortGivenTwice forces plans that give one host
// port to two allocations past the scheduler: the plan applier refuses the
// node, as it refuses a GPU instance given twice, and commits the rest.
func TestPlanApplierRefusesHostPortGivenTwice(t *testing.T) {
	cases := []struct {
		name       string
		setup      func(t *testing.T, f *planFixture) *structs.Plan
		wantOK     bool
		wantReason string
	}{
		{"one port to two allocs of one plan", func(t *testing.T, f *planFixture) *structs.Plan {
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 20001)))
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("admin", 20001)))
			return p
		}, false, "port 20001: given to both"},
		{"a port an existing alloc holds", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withPorts(f.alloc(100, 100), port("http", 20002)))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 20002)))
			return p
		}, false, "port 20002: given to both"},
		{"a stopped alloc holds its port until its client reports it terminal", func(t *testing.T, f *planFixture) *structs.Plan {
			old := withPorts(f.alloc(100, 100), port("http", 20003))
			f.existing(t, old)
			p := &structs.Plan{EvalID: "e1"}
			p.AppendStoppedAlloc(old, "job stopped")
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 20003)))
			return p
		}, false, "given to both"},
		{"a client-terminal alloc frees its port", func(t *testing.T, f *planFixture) *structs.Plan {
			old := withPorts(f.alloc(100, 100), port("http", 20004))
			f.existing(t, old)
			done := old.Copy()
			done.ClientStatus = structs.AllocClientStatusComplete
			if err := f.store.UpdateAllocsFromClient(f.next(), []*structs.Allocation{done}, 1); err != nil {
				t.Fatal(err)
			}
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 20004)))
			return p
		}, true, ""},
		{"different ports fit", func(t *testing.T, f *planFixture) *structs.Plan {
			f.existing(t, withPorts(f.alloc(100, 100), port("http", 20005)))
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 20006)))
			return p
		}, true, ""},
		{"a port out of range", func(t *testing.T, f *planFixture) *structs.Plan {
			p := &structs.Plan{EvalID: "e1"}
			p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 70000)))
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
			res, err := evaluatePlan(snap, plan, nopLog{})
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
			if refused := len(res.RejectedNodes) == 1 && len(res.NodeAllocation) == 0; refused == tc.wantOK {
				t.Fatalf("evaluatePlan: rejected %v, accepted %v", res.RejectedNodes, res.NodeAllocation)
			}
		})
	}
}

// TestPlanApplierRefusesNodeReservedPort: a forced plan that gives a
// port the node reserves is refused.
func TestPlanApplierRefusesNodeReservedPort(t *testing.T) {
	f := newPlanFixture(t, func(n *structs.Node) { n.ReservedResources.Networks.ReservedHostPorts = "22,8000-8100" })
	p := &structs.Plan{EvalID: "e1"}
	p.AppendAlloc(withPorts(f.alloc(100, 100), port("http", 8050)))
	snap, err := f.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ok, reason, err := evaluateNodePlan(snap, p, f.node.ID)
	if err != nil || ok || !strings.Contains(reason, "host port 8050 is reserved") {
		t.Fatalf("ok=%v reason=%q err=%v", ok, reason, err)
	}
}
