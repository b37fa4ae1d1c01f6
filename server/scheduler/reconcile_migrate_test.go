package scheduler

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestReconcileMigratingAllocKeepsRunningUntilReplaced(t *testing.T) {
	job := &structs.Job{ID: "web", Type: structs.JobTypeService, JobModifyIndex: 1,
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	old := &structs.Allocation{ID: "old", Name: structs.AllocName("web", "g", 0), JobID: "web", Job: job, TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning, CreateIndex: 5,
		DesiredTransition: structs.DesiredTransition{Migrate: true}}

	// Marked to migrate: a replacement is placed naming it, and it is not
	// stopped.
	res := reconcile(job, []*structs.Allocation{old}, 0)
	if len(res.stops) != 0 || len(res.places) != 1 || res.places[0].previous != old || res.places[0].index != 0 {
		t.Fatalf("stops %d places %+v: want one replacement of the migrating allocation and no stop", len(res.stops), res.places)
	}
	// Once the replacement exists the group is whole: nothing to do, and
	// the old allocation is left for the drainer to stop.
	repl := &structs.Allocation{ID: "new", Name: old.Name, JobID: "web", Job: job, TaskGroup: "g", PreviousAllocation: "old",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending, CreateIndex: 9}
	res = reconcile(job, []*structs.Allocation{old, repl}, 0)
	if len(res.stops) != 0 || len(res.places) != 0 {
		t.Fatalf("stops %d places %d: want none while the drainer waits for the replacement", len(res.stops), len(res.places))
	}
	// A migrating allocation above the count is stopped like any other.
	job2 := job.Copy()
	job2.TaskGroups[0].Count = 0
	old2 := old.Copy()
	old2.Job = job2
	res = reconcile(job2, []*structs.Allocation{old2}, 0)
	if len(res.stops) != 1 || len(res.places) != 0 {
		t.Fatalf("count 0: stops %d places %d", len(res.stops), len(res.places))
	}
}
