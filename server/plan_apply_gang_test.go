package server

import (
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestEvaluatePlan_GangAllOrNothing checks that the plan applier never
// commits part of a gang: when the node of one member is refused, the
// node of the other member is refused too, while a plan without gang
// members still commits its good part.
func TestEvaluatePlan_GangAllOrNothing(t *testing.T) {
	for _, gang := range []bool{true, false} {
		name := "gang"
		if !gang {
			name = "no gang"
		}
		t.Run(name, func(t *testing.T) {
			f := newPlanFixture(t, nil)
			other := statetest.Node(1)
			if err := f.store.UpsertNode(f.next(), other); err != nil {
				t.Fatal(err)
			}
			f.existing(t, f.alloc(100, 100, f.gpus[0]))
			m0 := f.alloc(100, 100, f.gpus[0]) // conflicts with the existing alloc
			m1 := statetest.Alloc(f.job, other)
			if gang {
				m0.Gang = &structs.GangInfo{Rank: 0, WorldSize: 2}
				m1.Gang = &structs.GangInfo{Rank: 1, WorldSize: 2}
			}
			plan := &structs.Plan{EvalID: "e1"}
			plan.AppendAlloc(m0)
			plan.AppendAlloc(m1)
			snap, err := f.store.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			res, err := evaluatePlan(snap, plan, nopLog{})
			if err != nil {
				t.Fatal(err)
			}
			wantCommitted := 1
			if gang {
				wantCommitted = 0
			}
			if _, exp, act := res.FullCommit(plan); exp != 2 || act != wantCommitted {
				t.Fatalf("committed %d of %d placements, want %d", act, exp, wantCommitted)
			}
			if res.RefreshIndex == 0 {
				t.Fatal("refused plan without a refresh index")
			}
		})
	}
}

// TestEvaluateNodePlan_MemoryShares checks the applier's rules for device
// memory shares: shares of one GPU fit while their sum is within its
// memory, and a GPU is never both shared and held whole.
func TestEvaluateNodePlan_MemoryShares(t *testing.T) {
	share := func(f *planFixture, mib int64, dev string) *structs.Allocation {
		a := f.alloc(100, 100, dev)
		a.AllocatedResources.Tasks["server"].Devices[0].MemoryMB = mib
		return a
	}
	cases := []struct {
		name     string
		existing func(f *planFixture) []*structs.Allocation
		place    func(f *planFixture) []*structs.Allocation
		ok       bool
	}{
		{"two shares within memory", func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 20*1024, f.gpus[0])}
		}, func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 20*1024, f.gpus[0])}
		}, true},
		{"shares over memory", func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 60*1024, f.gpus[0])}
		}, func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 30*1024, f.gpus[0])}
		}, false},
		{"share of a whole-held gpu", func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{f.alloc(100, 100, f.gpus[0])}
		}, func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 1024, f.gpus[0])}
		}, false},
		{"whole gpu that is shared", func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 1024, f.gpus[0])}
		}, func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{f.alloc(100, 100, f.gpus[0])}
		}, false},
		{"whole other gpu next to a share", func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{share(f, 1024, f.gpus[0])}
		}, func(f *planFixture) []*structs.Allocation {
			return []*structs.Allocation{f.alloc(100, 100, f.gpus[1])}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t, nil)
			if f.node.NodeResources.Devices[0].MemoryMiB() < 60*1024 {
				t.Fatalf("fixture GPU has %d MiB, the cases assume 80 GiB", f.node.NodeResources.Devices[0].MemoryMiB())
			}
			f.existing(t, tc.existing(f)...)
			plan := &structs.Plan{EvalID: "e1"}
			for _, a := range tc.place(f) {
				plan.AppendAlloc(a)
			}
			snap, err := f.store.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			ok, reason, err := evaluateNodePlan(snap, plan, f.node.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("fit = %v (%s), want %v", ok, reason, tc.ok)
			}
		})
	}
}
