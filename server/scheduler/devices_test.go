package scheduler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// twoTaskJob returns a batch job of one allocation whose group has two
// tasks, each asking for one device request.
func twoTaskJob(first, second *structs.RequestedDevice) *structs.Job {
	j := gpuJob("j", structs.JobTypeBatch, 1, 0, 100, 128)
	t1 := j.TaskGroups[0].Tasks[0]
	t2 := t1.Copy()
	t2.Name = "t2"
	t1.Resources.Devices = []*structs.RequestedDevice{first}
	t2.Resources.Devices = []*structs.RequestedDevice{second}
	j.TaskGroups[0].Tasks = append(j.TaskGroups[0].Tasks, t2)
	return j
}

// TestSharesTakenInTheSameFit (issue 11 item 14a) checks that the device
// requests of one group's tasks see what the earlier requests of the same
// placement take: two memory shares that together exceed one GPU's memory
// are not put on it, a share is never put on the instance a whole request of
// the same group takes, and shares that add up to exactly the memory fit
// (1 MiB more does not).
func TestSharesTakenInTheSameFit(t *testing.T) {
	const gpuMiB = 81920
	share := func(mib int) *structs.RequestedDevice {
		return &structs.RequestedDevice{Name: "nvidia/gpu", Count: 1, MemoryMB: mib}
	}
	whole := func(n int) *structs.RequestedDevice { return &structs.RequestedDevice{Name: "nvidia/gpu", Count: n} }
	cases := []struct {
		name   string
		gpus   int
		a, b   *structs.RequestedDevice
		placed bool
		dim    string // the exhausted dimension when not placed
	}{
		{"two 50 GiB shares on one 80 GiB GPU (the report)", 1, share(50 * 1024), share(50 * 1024), false, dimDeviceMemory + "nvidia/gpu"},
		{"two 50 GiB shares on two GPUs", 2, share(50 * 1024), share(50 * 1024), true, ""},
		{"shares exactly filling the GPU", 1, share(gpuMiB / 2), share(gpuMiB / 2), true, ""},
		{"shares 1 MiB over the GPU", 1, share(gpuMiB / 2), share(gpuMiB/2 + 1), false, dimDeviceMemory + "nvidia/gpu"},
		{"whole GPU then a share of the same one", 1, whole(1), share(1024), false, dimDeviceMemory + "nvidia/gpu"},
		{"share then the whole GPU", 1, share(1024), whole(1), false, "devices: nvidia/gpu"},
		{"whole and share on two GPUs", 2, whole(1), share(1024), true, ""},
		{"share and whole on two GPUs", 2, share(1024), whole(1), true, ""},
		{"share and two whole on two GPUs", 2, share(1024), whole(2), false, "devices: nvidia/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n", tc.gpus, h100, gpuMiB))
			ev := h.register(twoTaskJob(tc.a, tc.b))
			live := h.state.liveAllocs("j")
			checkInvariants(t, h.state)
			if !tc.placed {
				if len(live) != 0 {
					t.Fatalf("placed %v, want nothing", names(live))
				}
				m := ev.FailedTGAllocs["g"]
				if m == nil || m.DimensionExhausted[tc.dim] != 1 {
					t.Fatalf("FailedTGAllocs %+v, want %q exhausted", m, tc.dim)
				}
				if len(h.planner.plans) != 0 {
					t.Fatalf("submitted %d plans for a group that does not fit", len(h.planner.plans))
				}
				return
			}
			if len(live) != 1 || ev.Status != structs.EvalStatusComplete {
				t.Fatalf("live %v, eval %q", names(live), ev.Status)
			}
		})
	}
}

// multiModelNode returns a node with one device group per model, one GPU
// each, with the given memory in MiB.
func multiModelNode(id string, models map[string]int64) *structs.Node {
	n := gpuNode(id, 0, "", 0)
	i := 0
	for _, model := range []string{h100, a10, "NVIDIA L4"} {
		mem, ok := models[model]
		if !ok {
			continue
		}
		n.NodeResources.Devices = append(n.NodeResources.Devices, &structs.DeviceGroup{
			Vendor: structs.DeviceVendorNvidia, Type: structs.DeviceTypeGPU, Name: model,
			Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(mem, "MiB")},
			Instances:  []*structs.DeviceInstance{{ID: fmt.Sprintf("GPU-%s-%d", id, i), Healthy: true}},
		})
		i++
	}
	return n
}

// TestWholeRequestSpansDeviceGroups (issue 11 item 7) checks that a count = 2
// GPU request is placed on a node with two GPUs of different models when the
// request's constraints allow each model, and not when they allow only
// one; a single model that can serve the whole request is preferred.
func TestWholeRequestSpansDeviceGroups(t *testing.T) {
	cases := []struct {
		name        string
		models      map[string]int64
		constraints []*structs.Constraint
		count       int
		placed      bool
		groups      int // device groups the task's devices come from
	}{
		{"two models, no constraint (the report)", map[string]int64{h100: 81559, a10: 24576}, nil, 2, true, 2},
		{"both models pass the constraint", map[string]int64{h100: 81559, a10: 24576},
			[]*structs.Constraint{{LTarget: "${device.attr.memory}", RTarget: "20000", Operand: ">="}}, 2, true, 2},
		{"only one model passes", map[string]int64{h100: 81559, a10: 24576},
			[]*structs.Constraint{{LTarget: "${device.attr.memory}", RTarget: "40000", Operand: ">="}}, 2, false, 0},
		{"model pinned", map[string]int64{h100: 81559, a10: 24576},
			[]*structs.Constraint{{LTarget: "${device.model}", RTarget: h100, Operand: "="}}, 2, false, 0},
		{"three models, count 3", map[string]int64{h100: 81559, a10: 24576, "NVIDIA L4": 23034}, nil, 3, true, 3},
		{"count above all GPUs", map[string]int64{h100: 81559, a10: 24576}, nil, 3, false, 0},
		{"count 1 takes one model", map[string]int64{h100: 81559, a10: 24576}, nil, 1, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(multiModelNode("n", tc.models))
			j := gpuJob("j", structs.JobTypeBatch, 1, tc.count, 100, 128)
			j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = tc.constraints
			ev := h.register(j)
			checkInvariants(t, h.state)
			live := h.state.liveAllocs("j")
			if !tc.placed {
				if len(live) != 0 {
					t.Fatalf("placed %v", names(live))
				}
				if m := ev.FailedTGAllocs["g"]; m == nil || !strings.Contains(m.Explain(), "no nvidia/gpu device that matches") {
					t.Fatalf("explanation %q", m.Explain())
				}
				return
			}
			if len(live) != 1 {
				t.Fatalf("placed %v, want 1 (eval %+v)", names(live), ev.FailedTGAllocs["g"])
			}
			devs := live[0].AllocatedResources.Tasks["t"].Devices
			if len(devs) != tc.groups || len(live[0].DeviceIDs()) != tc.count {
				t.Fatalf("devices %+v, want %d instances from %d groups", devs, tc.count, tc.groups)
			}
		})
	}
	t.Run("a single model that serves the whole request is preferred", func(t *testing.T) {
		h := newHarness(t)
		n := multiModelNode("n", map[string]int64{h100: 81559, a10: 24576})
		g := n.NodeResources.Devices[1]
		g.Instances = append(g.Instances, &structs.DeviceInstance{ID: "GPU-n-a10-b", Healthy: true})
		h.state.upsertNode(n)
		h.register(gpuJob("j", structs.JobTypeBatch, 1, 2, 100, 128))
		checkInvariants(t, h.state)
		live := h.state.liveAllocs("j")
		if len(live) != 1 || len(live[0].AllocatedResources.Tasks["t"].Devices) != 1 || live[0].AllocatedResources.Tasks["t"].Devices[0].Name != a10 {
			t.Fatalf("placed %v, want both GPUs of the A10 group", live)
		}
	})
}
