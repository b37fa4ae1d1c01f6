package scheduler

import (
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestInPlaceUpdateKeepsGPUs (issue 11 item 6) checks that a job update
// that cannot make the current placement infeasible (affinity weights or
// affinities at any level, Meta) updates the allocations in place, keeping
// their GPUs and placing nothing, on a node with no GPU to spare, while a
// change that can (a device constraint, the task's resources) replaces them.
func TestInPlaceUpdateKeepsGPUs(t *testing.T) {
	withDeviceAffinity := func() *structs.Job {
		j := gpuJob("j", structs.JobTypeService, 1, 1, 100, 128)
		j.TaskGroups[0].Tasks[0].Resources.Devices[0].Affinities = []*structs.Affinity{
			{LTarget: "${device.model}", RTarget: h100, Operand: "=", Weight: 50},
		}
		return j
	}
	cases := []struct {
		name    string
		change  func(j *structs.Job)
		inPlace bool
	}{
		{"device affinity weight (the report)", func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Resources.Devices[0].Affinities[0].Weight = 80
		}, true},
		{"device affinity added", func(j *structs.Job) {
			d := j.TaskGroups[0].Tasks[0].Resources.Devices[0]
			d.Affinities = append(d.Affinities, &structs.Affinity{LTarget: "${device.attr.memory}", RTarget: "40000", Operand: ">=", Weight: 10})
		}, true},
		{"job affinity", func(j *structs.Job) {
			j.Affinities = []*structs.Affinity{{LTarget: "${node.class}", RTarget: "gpu", Operand: "=", Weight: 20}}
		}, true},
		{"group affinity", func(j *structs.Job) {
			j.TaskGroups[0].Affinities = []*structs.Affinity{{LTarget: "${node.class}", RTarget: "gpu", Operand: "=", Weight: -20}}
		}, true},
		{"task affinity and meta", func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Affinities = []*structs.Affinity{{LTarget: "${node.class}", RTarget: "gpu", Operand: "=", Weight: 5}}
			j.TaskGroups[0].Meta = map[string]string{"k": "v"}
		}, true},
		{"device constraint replaces", func(j *structs.Job) {
			d := j.TaskGroups[0].Tasks[0].Resources.Devices[0]
			d.Constraints = []*structs.Constraint{{LTarget: "${device.attr.memory}", RTarget: "40000", Operand: ">="}}
		}, false},
		{"job requires replaces", func(j *structs.Job) { j.Requires = []string{"voice"} }, false},
		{"task memory replaces", func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMB = 256 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n", 1, h100, 81559))
			h.register(withDeviceAffinity())
			before := h.state.liveAllocs("j")
			if len(before) != 1 {
				t.Fatalf("placed %d", len(before))
			}
			h.state.setClientStatus(structs.AllocClientStatusRunning, before[0])
			updated := h.state.jobs["j"].Copy()
			tc.change(updated)
			ev := h.register(updated)
			after := h.state.liveAllocs("j")
			if !tc.inPlace {
				// Destructive: the old allocation is stopped and its
				// replacement waits for its GPU, then takes it.
				if old := h.state.allocs[before[0].ID]; old.DesiredStatus != structs.AllocDesiredStatusStop || len(after) != 0 || ev.BlockedEval == "" {
					t.Fatalf("a change that can make the placement infeasible: old desired %q, live %v, blocked %q", old.DesiredStatus, names(after), ev.BlockedEval)
				}
				if len(h.state.jobs["j"].Requires) > 0 {
					return // no node offers the capability
				}
				// It only waits for the old allocation's GPU: `job run`
				// follows the blocked evaluation instead of failing.
				if m := ev.FailedTGAllocs["g"]; m == nil || m.AwaitingStops != 1 {
					t.Fatalf("FailedTGAllocs %+v, want AwaitingStops 1", m)
				}
				h.state.setClientStatus(structs.AllocClientStatusComplete, before[0])
				h.process(h.planner.evals[ev.BlockedEval])
				if after = h.state.liveAllocs("j"); len(after) != 1 || !slices.Equal(after[0].DeviceIDs(), before[0].DeviceIDs()) {
					t.Fatalf("replacement %v, want it on the freed GPU", names(after))
				}
				return
			}
			if len(after) != 1 || after[0].ID != before[0].ID {
				t.Fatalf("the update replaced the allocation: before %v after %v", names(before), names(after))
			}
			if !slices.Equal(after[0].DeviceIDs(), before[0].DeviceIDs()) {
				t.Fatalf("GPUs %v after the update, want %v", after[0].DeviceIDs(), before[0].DeviceIDs())
			}
			if after[0].Job.JobModifyIndex != h.state.jobs["j"].JobModifyIndex {
				t.Fatal("the allocation's job was not updated")
			}
			if ev.Status != structs.EvalStatusComplete || len(ev.FailedTGAllocs) != 0 || ev.BlockedEval != "" {
				t.Fatalf("eval %q failed %v blocked %q: an in-place update must not report a failed placement", ev.Status, ev.FailedTGAllocs, ev.BlockedEval)
			}
		})
	}
}

// TestDestructiveUpdateAwaitsStops checks that the replacement of an
// allocation stopped by the same plan, on a node with no other GPU, is
// counted as waiting for that stop (AllocMetric.AwaitingStops), whatever the
// job's priority (one too low to preempt anything included).
func TestDestructiveUpdateAwaitsStops(t *testing.T) {
	for _, prio := range []int{1, 5, 50, 100} {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 1, h100, 81559))
		j := gpuJob("j", structs.JobTypeService, 1, 1, 100, 128)
		j.Priority = prio
		h.register(j)
		updated := h.state.jobs["j"].Copy()
		updated.TaskGroups[0].Tasks[0].Resources.MemoryMB = 256
		ev := h.register(updated)
		if m := ev.FailedTGAllocs["g"]; m == nil || m.AwaitingStops != 1 || ev.BlockedEval == "" {
			t.Fatalf("priority %d: FailedTGAllocs %+v blocked %q, want AwaitingStops 1 and a blocked eval", prio, m, ev.BlockedEval)
		}
		if len(h.planner.created) != 1 {
			t.Fatalf("priority %d: created %d evals, want only the blocked one (nothing preempted)", prio, len(h.planner.created))
		}
	}
}
