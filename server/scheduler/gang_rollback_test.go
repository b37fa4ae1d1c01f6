package scheduler

import (
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestGangRollbackReleasesUsage (issue 11 item 14b) checks that a gang that
// does not fit whole gives back, within the same evaluation, what its
// members placed so far took: a later group of the same job then fits on
// the GPUs, CPU and memory the rolled-back members held. Each dimension is
// tried alone, so a rollback that forgets any one of them is caught.
func TestGangRollbackReleasesUsage(t *testing.T) {
	cases := []struct {
		name string
		// gang is the gang member's ask, later the later group's ask.
		gang, later func(r *structs.Resources)
		node        func(n *structs.Node)
		// nodes is how many such nodes there are (default 1); the gang
		// has one member more than nodes, the later group one per node.
		nodes   int
		unified bool
	}{
		{"whole GPUs", func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 2}}
		}, func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 2}}
		}, nil, 0, false},
		{"memory shares", func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 1, MemoryMB: 60 * 1024}}
			r.CPU = 100
		}, func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 1, MemoryMB: 60 * 1024}}
		}, func(n *structs.Node) { n.NodeResources.Devices[0].Instances = n.NodeResources.Devices[0].Instances[:1] }, 0, false},
		{"cpu", func(r *structs.Resources) { r.CPU = 30000 }, func(r *structs.Resources) { r.CPU = 30000 }, nil, 0, false},
		{"memory", func(r *structs.Resources) { r.MemoryMB = 200 * 1024 }, func(r *structs.Resources) { r.MemoryMB = 200 * 1024 }, nil, 0, false},
		{"whole GPUs on three nodes", func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 2}}
		}, func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 2}}
		}, nil, 3, false},
		{"unified memory share", func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "gpu", Count: 1, MemoryMB: 40 * 1024}}
		}, func(r *structs.Resources) {
			r.Devices = []*structs.RequestedDevice{{Name: "gpu", Count: 1, MemoryMB: 40 * 1024}}
		}, nil, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			// One node fits one gang member; the gang of two cannot be
			// placed whole.
			nodes := max(tc.nodes, 1)
			for i := 0; i < nodes; i++ {
				n := gpuNode(fmt.Sprintf("n%d", i), 2, h100, 81920)
				if tc.unified {
					n = unifiedNode(fmt.Sprintf("n%d", i), 64*1024)
				}
				if tc.node != nil {
					tc.node(n)
				}
				h.state.upsertNode(n)
			}
			job := gangJob("j", nodes+1, 0)
			tc.gang(job.TaskGroups[0].Tasks[0].Resources)
			later := gpuJob("j", structs.JobTypeBatch, nodes, 0, 100, 128).TaskGroups[0]
			later.Name = "later"
			tc.later(later.Tasks[0].Resources)
			job.TaskGroups = append(job.TaskGroups, later)
			ev := h.register(job)
			if ev.QueuedAllocations["g"] != nodes+1 {
				t.Fatalf("gang queued %d, want %d (it cannot be placed whole)", ev.QueuedAllocations["g"], nodes+1)
			}
			if q := ev.QueuedAllocations["later"]; q != 0 {
				t.Fatalf("later group queued %d: the rolled-back gang member still holds its resources (%+v)", q, ev.FailedTGAllocs["later"])
			}
			live := h.state.liveAllocs("j")
			if len(live) != nodes || live[0].TaskGroup != "later" {
				t.Fatalf("live %v, want only the later group's allocation", names(live))
			}
			checkInvariants(t, h.state)
		})
	}
}
