package state

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/gpulayer/gpulayer/structs"
)

// sameString reports whether a and b share their bytes (one interned
// copy), not only their content.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// clientStates is a client's report as decoded from its Raft entry: every
// string its own copy.
func clientStates(exit string) map[string]*structs.TaskState {
	own := func(s string) string { return strings.Clone(s) }
	return map[string]*structs.TaskState{own("server"): {State: own("dead"), StartedAt: 1, FinishedAt: 2, Events: []*structs.TaskEvent{
		{Type: own("Received"), Time: 1}, nil,
		{Type: own("Terminated"), Time: 3, Message: own("exited"), Details: map[string]string{own("exit_code"): own(exit)}}}}}
}

func TestStoredTaskStatesEqualAndShared(t *testing.T) {
	in1, in2 := clientStates("0"), clientStates("0")
	want := clientStates("0")
	s1, s2 := storedTaskStates(in1), storedTaskStates(in2)
	if !reflect.DeepEqual(s1, want) || !reflect.DeepEqual(s2, want) {
		t.Fatalf("stored states differ from the report:\n%#v\n%#v", s1["server"], want["server"])
	}
	a, b := s1["server"], s2["server"]
	if !sameString(a.State, b.State) || !sameString(a.Events[0].Type, b.Events[0].Type) || !sameString(a.Events[2].Message, b.Events[2].Message) {
		t.Fatal("state, event type or message not interned")
	}
	if a.Events[1] != nil {
		t.Fatalf("nil event became %#v", a.Events[1])
	}
	if reflect.ValueOf(a.Events[2].Details).UnsafePointer() != reflect.ValueOf(b.Events[2].Details).UnsafePointer() {
		t.Fatal("equal small Details maps not shared")
	}
	// The stored copy does not alias the report.
	in1["server"].Events[2].Details["exit_code"] = "1"
	in1["server"].Events[0].Type = "Changed"
	in1["server"].State = "running"
	if !reflect.DeepEqual(s1, want) {
		t.Fatalf("stored states changed with the report: %#v", s1["server"])
	}
	other := storedTaskStates(clientStates("2"))
	if got := other["server"].Events[2].Details["exit_code"]; got != "2" {
		t.Fatalf("a different Details map got %q from the cache, want 2", got)
	}
	if storedTaskStates(nil) != nil {
		t.Fatal("nil states became non-nil")
	}
	if got := storedTaskStates(map[string]*structs.TaskState{"t": nil}); len(got) != 1 || got["t"] != nil {
		t.Fatalf("nil task state: %#v", got)
	}
}

func TestSharedDetailsLargeOrLongNotShared(t *testing.T) {
	long := map[string]string{"error": strings.Repeat("x", maxInternLen+1)}
	a, b := sharedDetails(long), sharedDetails(long)
	if !reflect.DeepEqual(a, long) || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		t.Fatal("a map with a long value is not a private copy")
	}
	big := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
	if c := sharedDetails(big); !reflect.DeepEqual(c, big) || reflect.ValueOf(c).UnsafePointer() == reflect.ValueOf(sharedDetails(big)).UnsafePointer() {
		t.Fatal("a map over detailsMaxPairs is not a private copy")
	}
	if got := sharedDetails(map[string]string{}); got == nil || len(got) != 0 {
		t.Fatalf("empty map: %#v", got)
	}
	if sharedDetails(nil) != nil {
		t.Fatal("nil map became non-nil")
	}
	// Pairs that concatenate alike are different maps.
	x, y := sharedDetails(map[string]string{"ab": "c"}), sharedDetails(map[string]string{"a": "bc"})
	if x["ab"] != "c" || y["a"] != "bc" {
		t.Fatalf("cache confused %v and %v", x, y)
	}
}

func TestCompactPlacedAllocSharesJobStrings(t *testing.T) {
	job := &structs.Job{ID: "web", Namespace: "default"}
	a := &structs.Allocation{ID: "a1", JobID: strings.Clone("web"), Job: job, NodeID: strings.Clone("node-1"), EvalID: strings.Clone("ev"),
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			strings.Clone("t"): {Devices: []*structs.AllocatedDeviceResource{{Vendor: strings.Clone("nvidia"), Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-1"}}}}}}}
	b := &structs.Allocation{ID: "a2", JobID: strings.Clone("web"), Job: job, NodeID: strings.Clone("node-1"), EvalID: strings.Clone("ev"),
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			strings.Clone("t"): {Devices: []*structs.AllocatedDeviceResource{{Vendor: strings.Clone("nvidia"), Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-2"}}}}}}}
	compactPlacedAlloc(a)
	compactPlacedAlloc(b)
	if !sameString(a.JobID, job.ID) || !sameString(a.NodeID, b.NodeID) || !sameString(a.EvalID, b.EvalID) {
		t.Fatal("job, node or evaluation ID not shared")
	}
	da, db := a.AllocatedResources.Tasks["t"].Devices[0], b.AllocatedResources.Tasks["t"].Devices[0]
	if !sameString(da.Vendor, db.Vendor) || da.DeviceIDs[0] != "GPU-1" || db.DeviceIDs[0] != "GPU-2" || len(a.AllocatedResources.Tasks) != 1 {
		t.Fatalf("devices: %#v %#v", da, db)
	}
}

// TestCompactPlacedAllocSharesTaskNameKeys (hostile17): the task names
// keying AllocatedResources.Tasks are meant to be swapped for their
// interned copy; comparing the interned string with the key by content
// (always equal) left every allocation its own decoded key.
func TestCompactPlacedAllocSharesTaskNameKeys(t *testing.T) {
	mk := func() *structs.Allocation {
		return &structs.Allocation{ID: "a", AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			strings.Clone("trainer"): {CPU: 1}, strings.Clone("sidecar"): {CPU: 2}}}}
	}
	a, b := mk(), mk()
	compactPlacedAlloc(a)
	compactPlacedAlloc(b)
	for ka, ta := range a.AllocatedResources.Tasks {
		found := false
		for kb := range b.AllocatedResources.Tasks {
			if kb == ka {
				found = true
				if !sameString(ka, kb) {
					t.Errorf("task key %q not shared between the two allocations", ka)
				}
			}
		}
		if !found || ta == nil || len(a.AllocatedResources.Tasks) != 2 {
			t.Fatalf("tasks after compaction: %v", a.AllocatedResources.Tasks)
		}
	}
	if a.AllocatedResources.Tasks["trainer"].CPU != 1 || a.AllocatedResources.Tasks["sidecar"].CPU != 2 {
		t.Fatalf("task resources moved: %+v", a.AllocatedResources.Tasks)
	}
}
