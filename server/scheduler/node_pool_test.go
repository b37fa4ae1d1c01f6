package scheduler

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestNodePoolFeasibility: a job is placed only on nodes of its pool
// (empty is "default" on both sides; "all" takes any node), for batch and
// service jobs, and a node of another pool is counted under the reason
// "node pool: node in pool X, job wants Y".
func TestNodePoolFeasibility(t *testing.T) {
	cases := []struct {
		name, jobPool string
		wantNode      string // "" when nothing may be placed
		wantReasons   map[string]int
	}{
		{"pool gpu", "gpu", "in-gpu", map[string]int{"node pool: node in pool default, job wants gpu": 2}},
		{"empty is default", "", "", nil},
		{"default", "default", "", nil},
		{"all", "all", "*", nil},
		{"missing pool blocks", "other", "", map[string]int{
			"node pool: node in pool gpu, job wants other":     1,
			"node pool: node in pool default, job wants other": 2,
		}},
	}
	for _, typ := range []string{structs.JobTypeBatch, structs.JobTypeService} {
		for _, tc := range cases {
			t.Run(typ+"/"+tc.name, func(t *testing.T) {
				h := newHarness(t)
				inGPU := gpuNode("in-gpu", 1, h100, 81559)
				inGPU.NodePool = "gpu"
				explicit := gpuNode("in-default", 1, h100, 81559)
				explicit.NodePool = "default"
				implicit := gpuNode("no-pool", 1, h100, 81559)
				for _, n := range []*structs.Node{inGPU, explicit, implicit} {
					h.state.upsertNode(n)
				}
				job := gpuJob("j", typ, 1, 1, 100, 128)
				job.NodePool = tc.jobPool
				ev := h.register(job)
				live := h.state.liveAllocs("j")
				switch {
				case tc.name == "missing pool blocks":
					if len(live) != 0 {
						t.Fatalf("placed %d allocations in a pool without nodes", len(live))
					}
					m := ev.FailedTGAllocs["g"]
					if m == nil {
						t.Fatal("no failed group metrics")
					}
					for reason, n := range tc.wantReasons {
						if m.ConstraintFiltered[reason] != n {
							t.Fatalf("ConstraintFiltered = %v, want %q: %d", m.ConstraintFiltered, reason, n)
						}
					}
					return
				case len(live) != 1:
					t.Fatalf("placed %d allocations, want 1 (failed: %+v)", len(live), ev.FailedTGAllocs)
				}
				got := live[0].NodeID
				switch tc.wantNode {
				case "*":
				case "":
					if got == inGPU.ID {
						t.Fatalf("a %q job was placed on the gpu pool's node", tc.jobPool)
					}
				default:
					if got != tc.wantNode {
						t.Fatalf("placed on %s, want %s", got, tc.wantNode)
					}
				}
			})
		}
	}
}

// TestNodePoolReasonKeepsDeviceReason: a node of another pool that also
// lacks the devices is counted under the device reason, so a blocked
// group still says what a new node of its pool must have.
func TestNodePoolReasonKeepsDeviceReason(t *testing.T) {
	h := newHarness(t)
	cpuOnly := gpuNode("cpu", 0, h100, 81559)
	h.state.upsertNode(cpuOnly)
	job := gpuJob("j", structs.JobTypeBatch, 1, 1, 100, 128)
	job.NodePool = "gpu"
	ev := h.register(job)
	m := ev.FailedTGAllocs["g"]
	if m == nil || m.ConstraintFiltered["missing devices: nvidia/gpu"] != 1 {
		t.Fatalf("ConstraintFiltered = %+v", m)
	}
}

// TestNodePoolChangeMovesAllocations: a job moved to another pool is not
// updated in place on its old node; its allocation is replaced on a node
// of the new pool.
func TestNodePoolChangeMovesAllocations(t *testing.T) {
	h := newHarness(t)
	old := gpuNode("old", 1, h100, 81559)
	neu := gpuNode("new", 1, h100, 81559)
	neu.NodePool = "gpu"
	h.state.upsertNode(old)
	h.state.upsertNode(neu)
	h.register(gpuJob("j", structs.JobTypeService, 1, 1, 100, 128))
	if live := h.state.liveAllocs("j"); len(live) != 1 || live[0].NodeID != old.ID {
		t.Fatalf("first placement = %+v", live)
	}
	moved := h.state.jobs["j"].Copy()
	moved.NodePool = "gpu"
	h.register(moved)
	live := h.state.liveAllocs("j")
	if len(live) != 1 || live[0].NodeID != neu.ID {
		for _, a := range live {
			t.Logf("live alloc on %s (%s)", a.NodeID, a.DesiredStatus)
		}
		t.Fatalf("after the pool change: %d live allocations, want 1 on %s", len(live), neu.ID)
	}
}
