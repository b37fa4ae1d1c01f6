package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestCheckOperand(t *testing.T) {
	cases := []struct {
		op   string
		l, r string
		want bool
	}{
		{"=", "linux", "linux", true},
		{"==", "linux", "darwin", false},
		{"!=", "linux", "darwin", true},
		{">=", "81559 MiB", "40 GiB", true},
		{"<", "24576 MiB", "40 GiB", true},
		{">", "16", "8", true},
		{">", "b", "a", true},
		{"regexp", "NVIDIA H100", "^NVIDIA H", true},
		{"regexp", "x", "(", false},
		{"set_contains", "a,b, c", "c,a", true},
		{"set_contains", "a,b", "a,d", false},
		{"version", "12.4", ">= 12.0, < 13", true},
		{"version", "v1.2.3-rc1", "~> 1.2", true},
		{"version", "2.0", "~> 1.2", false},
		{"version", "1.2.9", "~> 1.2.3", true},
		{"version", "1.3.0", "~> 1.2.3", false},
		{"version", "abc", ">= 1", false},
		{"bogus", "a", "a", false},
	}
	for _, tc := range cases {
		t.Run(tc.op+" "+tc.l+" "+tc.r, func(t *testing.T) {
			if got := checkOperand(tc.op, textValue(tc.l), textValue(tc.r), regexpCache{}); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	missing := operandValue{}
	set := textValue("x")
	for _, tc := range []struct {
		op   string
		l, r operandValue
		want bool
	}{
		{"is_set", set, missing, true},
		{"is_set", missing, missing, false},
		{"is_not_set", missing, missing, true},
		{"!=", missing, set, true},
		{"=", missing, set, false},
		{"<", missing, set, false},
	} {
		if got := checkOperand(tc.op, tc.l, tc.r, regexpCache{}); got != tc.want {
			t.Errorf("%s with found %v/%v: got %v, want %v", tc.op, tc.l.found, tc.r.found, got, tc.want)
		}
	}
}

// TestRanking checks where one more allocation goes among otherwise equal
// nodes.
func TestRanking(t *testing.T) {
	t.Run("partly used node before idle node", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 8, h100, 81559))
		h.state.upsertNode(gpuNode("b", 8, h100, 81559))
		h.register(gpuJob("first", structs.JobTypeBatch, 1, 1, 100, 128))
		firstNode := h.state.liveAllocs("first")[0].NodeID
		h.register(gpuJob("second", structs.JobTypeBatch, 3, 1, 100, 128))
		for _, a := range h.state.liveAllocs("second") {
			if a.NodeID != firstNode {
				t.Fatalf("%s on %s, want packed onto %s", a.Name, a.NodeID, firstNode)
			}
		}
	})
	t.Run("small GPU job prefers the smaller node", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a-big", 8, h100, 81559))
		h.state.upsertNode(gpuNode("b-small", 4, h100, 81559))
		h.register(gpuJob("j", structs.JobTypeBatch, 1, 1, 100, 128))
		if n := h.state.liveAllocs("j")[0].NodeID; n != "b-small" {
			t.Fatalf("placed on %s, want b-small", n)
		}
	})
	t.Run("CPU-only job avoids idle GPU node", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a-gpu", 8, h100, 81559))
		h.state.upsertNode(gpuNode("b-cpu", 0, "", 0))
		h.register(gpuJob("j", structs.JobTypeBatch, 1, 0, 100, 128))
		if n := h.state.liveAllocs("j")[0].NodeID; n != "b-cpu" {
			t.Fatalf("placed on %s, want b-cpu", n)
		}
	})
	t.Run("node affinity", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 8, h100, 81559))
		b := gpuNode("b", 8, h100, 81559)
		b.Meta["zone"] = "z2"
		h.state.upsertNode(b)
		job := gpuJob("j", structs.JobTypeBatch, 1, 1, 100, 128)
		job.Affinities = []*structs.Affinity{{LTarget: "${meta.zone}", Operand: "=", RTarget: "z2", Weight: 50}}
		h.register(job)
		if n := h.state.liveAllocs("j")[0].NodeID; n != "b" {
			t.Fatalf("placed on %s, want b", n)
		}
	})
	t.Run("device affinity picks the group", func(t *testing.T) {
		h := newHarness(t)
		n := gpuNode("n", 2, a10, 24576)
		n.NodeResources.Devices = append(n.NodeResources.Devices, gpuNode("x", 2, h100, 81559).NodeResources.Devices[0])
		h.state.upsertNode(n)
		job := gpuJob("j", structs.JobTypeBatch, 1, 1, 100, 128)
		job.TaskGroups[0].Tasks[0].Resources.Devices[0].Affinities = []*structs.Affinity{{LTarget: "${device.model}", Operand: "=", RTarget: h100, Weight: 100}}
		h.register(job)
		d := h.state.liveAllocs("j")[0].AllocatedResources.Tasks["t"].Devices[0]
		if d.Name != h100 || d.DeviceIDs[0] != "GPU-x-0" {
			t.Fatalf("got %s %v, want the H100 group", d.Name, d.DeviceIDs)
		}
	})
}

// TestPlanRefused checks retries after the plan applier refuses part of a
// plan, and the failure after too many refusals.
func TestPlanRefused(t *testing.T) {
	t.Run("retry after a concurrent placement", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 2, h100, 81559))
		h.state.upsertNode(gpuNode("b", 2, h100, 81559))
		raced := false
		h.planner.beforeApply = func(plan *structs.Plan) {
			if raced {
				return
			}
			raced = true
			// Another scheduler takes both GPUs of the chosen node first.
			for nodeID := range plan.NodeAllocation {
				other := gpuJob("other", structs.JobTypeBatch, 1, 2, 100, 128)
				h.state.upsertAlloc(&structs.Allocation{
					ID: structs.GenerateUUID(), Name: "other.g[0]", NodeID: nodeID, JobID: "other", Job: other, TaskGroup: "g",
					DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
					AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{"t": {
						CPU: 100, MemoryMB: 128, Devices: []*structs.AllocatedDeviceResource{{
							Vendor: "nvidia", Type: "gpu", Name: h100, DeviceIDs: []string{"GPU-" + nodeID + "-0", "GPU-" + nodeID + "-1"},
						}},
					}}},
				})
			}
		}
		ev := h.register(gpuJob("j", structs.JobTypeBatch, 1, 2, 100, 128))
		if ev.Status != structs.EvalStatusComplete || len(h.planner.plans) != 2 {
			t.Fatalf("status %q after %d plans", ev.Status, len(h.planner.plans))
		}
		if n := len(h.state.liveAllocs("j")); n != 1 {
			t.Fatalf("%d allocations placed, want 1", n)
		}
		checkInvariants(t, h.state)
	})
	t.Run("maximum attempts", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 2, h100, 81559))
		h.planner.rejectAll = true
		ev := h.register(gpuJob("j", structs.JobTypeBatch, 1, 1, 100, 128))
		if ev.Status != structs.EvalStatusFailed || ev.StatusDescription != descMaxAttempts || len(h.planner.plans) != maxPlanAttempts {
			t.Fatalf("status %q %q after %d plans", ev.Status, ev.StatusDescription, len(h.planner.plans))
		}
	})
}

// TestDeterministic checks that the same snapshot and evaluation give the
// same placements, apart from allocation IDs.
func TestDeterministic(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 100; i++ {
		h.state.upsertNode(gpuNode(fmt.Sprintf("n%03d", i), 8, h100, 81559))
	}
	h.register(gpuJob("filler", structs.JobTypeBatch, 150, 3, 100, 128))
	j := h.state.upsertJob(gpuJob("j", structs.JobTypeBatch, 50, 2, 100, 128))
	ev := newEval(j, structs.EvalTriggerJobRegister)
	var first []string
	for run := 0; run < 3; run++ {
		out, err := computeAttempt(h.state, ev)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, allocs := range out.plan.NodeAllocation {
			for _, a := range allocs {
				got = append(got, a.Name+"@"+a.NodeID+":"+strings.Join(a.DeviceIDs(), ","))
			}
		}
		sort.Strings(got)
		if len(got) != 50 {
			t.Fatalf("run %d placed %d, want 50", run, len(got))
		}
		if run == 0 {
			first = got
		} else if !slices.Equal(first, got) {
			t.Fatalf("run %d differs from run 0", run)
		}
	}
}
