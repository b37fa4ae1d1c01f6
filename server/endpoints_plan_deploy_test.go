package server

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestJobPlanSurgeWithoutRoom checks that job plan says, before anything
// stops, that a max_unavailable = 0 update has no room for a new copy:
// 3 allocations each hold one of the node's 3 GPUs, so the new version
// waits and nothing is stopped.
func TestJobPlanSurgeWithoutRoom(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	node := statetest.Node(3)
	if err := st.UpsertNode(1, node); err != nil {
		t.Fatal(err)
	}
	zero := 0
	job := statetest.Job()
	job.TaskGroups[0].Count = 3
	job.TaskGroups[0].Tasks[0].Resources.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 1}}
	job.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, MaxUnavailable: &zero}
	job.Canonicalize()
	if err := st.UpsertJob(2, job); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.JobByID(nil, job.ID)
	var placed []*structs.Allocation
	gpus := node.NodeResources.Devices[0].Instances
	for i := 0; i < 3; i++ {
		a := statetest.Alloc(stored, node)
		a.Name = structs.AllocName(job.ID, "web", i)
		a.AllocatedResources.Tasks["server"].Devices[0].DeviceIDs = []string{gpus[i].ID}
		a.ClientStatus = structs.AllocClientStatusRunning
		placed = append(placed, a)
	}
	if err := st.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{AllocsPlaced: placed, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	next := stored.Copy()
	next.TaskGroups[0].Tasks[0].Env = map[string]string{"VERSION": "2"}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := planJob(snap, next)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if g.Stop != 0 || g.Place != 0 || g.Queued != 1 {
		t.Fatalf("plan: stop %d place %d queued %d, want nothing stopped and 1 waiting", g.Stop, g.Place, g.Queued)
	}
	notes := strings.Join(g.Notes, "\n")
	if !strings.Contains(notes, "max_unavailable = 0") || !strings.Contains(notes, "nothing stops until there is room") {
		t.Fatalf("notes = %q", notes)
	}
	if g.Failure == nil || !strings.Contains(g.Failure.Explanation, "keeps running until a new one fits") {
		t.Fatalf("failure = %+v", g.Failure)
	}
}
