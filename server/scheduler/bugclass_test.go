package scheduler

import (
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// Bug classes that bit other schedulers. The fourth, "the GPU count a task
// sees in its env is what it asked for, not the host's", is checked on the
// client (agent/client: TestBugClassGPUCountInEnv); "one group with two
// tasks of 2 GPUs each lands on a 4-GPU node with 4 distinct UUIDs" is also
// TestDistinctDevicesAcrossTasks.

// TestBugClassInPlaceKeepsGPUs: an in-place update (a Meta change) keeps
// the same GPU UUIDs, and a second job then gets the other GPU.
func TestBugClassInPlaceKeepsGPUs(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(gpuNode("n", 2, h100, 81559))
	first := gpuJob("first", structs.JobTypeService, 1, 1, 100, 128)
	h.register(first)
	before := h.state.liveAllocs("first")
	if len(before) != 1 {
		t.Fatalf("placed %d", len(before))
	}
	ids := before[0].DeviceIDs()

	updated := h.state.jobs["first"].Copy()
	updated.Meta = map[string]string{"owner": "new"}
	updated.TaskGroups[0].Tasks[0].Meta = map[string]string{"k": "v"}
	h.register(updated)
	after := h.state.liveAllocs("first")
	if len(after) != 1 || after[0].ID != before[0].ID {
		t.Fatalf("in-place update replaced the allocation: before %v after %v", names(before), names(after))
	}
	if got := after[0].DeviceIDs(); !slices.Equal(got, ids) {
		t.Fatalf("GPUs after the in-place update %v, want %v", got, ids)
	}
	if after[0].Job.Meta["owner"] != "new" {
		t.Fatalf("allocation's job not updated: %v", after[0].Job.Meta)
	}

	h.register(gpuJob("second", structs.JobTypeService, 1, 1, 100, 128))
	second := h.state.liveAllocs("second")
	if len(second) != 1 || len(second[0].DeviceIDs()) != 1 || second[0].DeviceIDs()[0] == ids[0] {
		t.Fatalf("second job got %v, want the other GPU than %v", second[0].DeviceIDs(), ids)
	}
	checkInvariants(t, h.state)
}

// TestBugClassTwoTasksFourGPUs: one group with two tasks of 2 GPUs each
// lands on a 4-GPU node with 4 distinct UUIDs, two per task.
func TestBugClassTwoTasksFourGPUs(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(gpuNode("small", 2, h100, 81559))
	h.state.upsertNode(gpuNode("big", 4, h100, 81559))
	job := gpuJob("j", structs.JobTypeBatch, 1, 2, 100, 128)
	t2 := job.TaskGroups[0].Tasks[0].Copy()
	t2.Name = "t2"
	job.TaskGroups[0].Tasks = append(job.TaskGroups[0].Tasks, t2)
	h.register(job)
	live := h.state.liveAllocs("j")
	if len(live) != 1 || live[0].NodeID != "big" {
		t.Fatalf("placed %v, want one allocation on the 4-GPU node", names(live))
	}
	seen := map[string]bool{}
	for _, task := range []string{"t", "t2"} {
		ids := live[0].AllocatedResources.Tasks[task].Devices[0].DeviceIDs
		if len(ids) != 2 {
			t.Fatalf("task %s holds %v, want 2 GPUs", task, ids)
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	if len(seen) != 4 {
		t.Fatalf("distinct GPUs %v, want 4", seen)
	}
}

// TestBugClassMIGInstances: a node with 1 MIG-enabled GPU and 2 slices
// offers exactly 2 instances: count = 2 fits, count = 3 stays queued.
// (agent/client/devices TestMIGSlicesAreTheInstances checks the node
// reports the 2 slices and not the parent.)
func TestBugClassMIGInstances(t *testing.T) {
	for _, tc := range []struct {
		count, placed, queued int
	}{{2, 2, 0}, {3, 2, 1}} {
		h := newHarness(t)
		h.state.upsertNode(migNode("mig", 2))
		ev := h.register(gpuJob("j", structs.JobTypeBatch, tc.count, 1, 100, 128))
		if n := len(h.state.liveAllocs("j")); n != tc.placed || ev.QueuedAllocations["g"] != tc.queued {
			t.Fatalf("count %d: placed %d queued %v, want %d and %d", tc.count, n, ev.QueuedAllocations, tc.placed, tc.queued)
		}
		if tc.queued > 0 && ev.BlockedEval == "" {
			t.Fatalf("count %d: no blocked evaluation", tc.count)
		}
		checkInvariants(t, h.state)
	}
	// A single allocation asking for 3 instances never fits the 2 slices.
	h := newHarness(t)
	h.state.upsertNode(migNode("mig", 2))
	ev := h.register(gpuJob("three", structs.JobTypeBatch, 1, 3, 100, 128))
	if ev.QueuedAllocations["g"] != 1 || ev.FailedTGAllocs["g"].ConstraintFiltered["missing devices: nvidia/gpu"] != 1 {
		t.Fatalf("three: queued %v failed %+v", ev.QueuedAllocations, ev.FailedTGAllocs["g"])
	}
}
