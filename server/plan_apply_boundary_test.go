package server

import (
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestEvaluateNodePlanBoundaries (issue 11 item 14c) checks the plan
// applier's capacity checks at their exact boundaries: CPU, memory and
// device memory shares exactly at what the node gives out fit, and 1 MHz or
// 1 MiB more is refused. The capacities are written out from the node's
// declared resources here, not read through the functions under test.
func TestEvaluateNodePlanBoundaries(t *testing.T) {
	const (
		nodeCPU, reservedCPU = 16000, 100   // statetest.Node
		nodeMem, reservedMem = 65536, 256   // MiB
		gpuMem               = int64(81559) // MiB of the H100 group
		hostCPU              = nodeCPU - reservedCPU
		hostMem              = nodeMem - reservedMem
	)
	share := func(f *planFixture, a *structs.Allocation, mib int64) *structs.Allocation {
		g := f.node.NodeResources.Devices[0]
		a.AllocatedResources.Tasks["server"].Devices = []*structs.AllocatedDeviceResource{{
			Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: []string{f.gpus[0]}, MemoryMB: mib,
		}}
		return a
	}
	cases := []struct {
		name  string
		extra int64 // added to the last dimension's exact capacity
		build func(f *planFixture, extra int64) (existing, placed *structs.Allocation)
	}{
		{"cpu", 0, nil}, {"cpu", 1, nil},
		{"memory", 0, nil}, {"memory", 1, nil},
		{"gpu memory shares", 0, nil}, {"gpu memory shares", 1, nil},
	}
	for i := range cases {
		switch cases[i].name {
		case "cpu":
			cases[i].build = func(f *planFixture, extra int64) (*structs.Allocation, *structs.Allocation) {
				return f.alloc(hostCPU/2, 1024), f.alloc(hostCPU-hostCPU/2+extra, 1024)
			}
		case "memory":
			cases[i].build = func(f *planFixture, extra int64) (*structs.Allocation, *structs.Allocation) {
				return f.alloc(100, hostMem/2), f.alloc(100, hostMem-hostMem/2+extra)
			}
		case "gpu memory shares":
			cases[i].build = func(f *planFixture, extra int64) (*structs.Allocation, *structs.Allocation) {
				return share(f, f.alloc(100, 100), gpuMem/2), share(f, f.alloc(100, 100), gpuMem-gpuMem/2+extra)
			}
		}
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s at capacity +%d", tc.name, tc.extra), func(t *testing.T) {
			f := newPlanFixture(t, nil)
			old, a := tc.build(f, tc.extra)
			f.existing(t, old)
			plan := &structs.Plan{EvalID: "e1"}
			plan.AppendAlloc(a)
			snap, err := f.store.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			ok, reason, err := evaluateNodePlan(snap, plan, f.node.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.extra == 0; ok != want {
				t.Fatalf("ok=%v (%q), want %v: exactly at capacity fits, 1 over does not", ok, reason, want)
			}
		})
	}
	t.Run("unified memory at capacity", func(t *testing.T) {
		for _, extra := range []int64{0, 1} {
			f := newPlanFixture(t, func(n *structs.Node) {
				n.MemoryModel = structs.MemoryModelUnified
				n.ReservedResources.MemoryMB = 0
				n.NodeResources.Devices[0].Attributes["memory"] = structs.NewIntAttribute(nodeMem, "MiB")
			})
			// A quarter of the memory stays with the OS; a share counts
			// against host memory.
			host := int64(nodeMem - nodeMem/4)
			f.existing(t, f.alloc(100, host/2))
			plan := &structs.Plan{EvalID: "e1"}
			plan.AppendAlloc(share(f, f.alloc(100, 0), host-host/2+extra))
			snap, _ := f.store.Snapshot()
			ok, reason, err := evaluateNodePlan(snap, plan, f.node.ID)
			if err != nil || ok != (extra == 0) {
				t.Fatalf("+%d MiB: ok=%v (%q) err=%v", extra, ok, reason, err)
			}
		}
	})
}
