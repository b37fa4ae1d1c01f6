package state

import (
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// A placement without its own Job takes the request's Job when it is the
// same job, so the plan applier can send the job once per Raft entry.
func TestUpsertPlanResultsAttachesRequestJob(t *testing.T) {
	s := testStore(t)
	stored := statetest.BatchJob(1)
	must(t, s.UpsertJob(1, stored))
	planned := stored.Copy()
	planned.Meta = map[string]string{"planned": "yes"}
	node := statetest.Node(2)

	mine := statetest.Alloc(planned, node)
	mine.Job = nil
	other := statetest.Alloc(planned, node)
	other.ID = structs.GenerateUUID()
	other.Job = nil
	other.JobID = "some-other-job"
	must(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{
		AllocsPlaced: []*structs.Allocation{mine, other}, Job: planned, UpdatedAt: 5,
	}))
	got, err := s.AllocByID(nil, mine.ID)
	must(t, err)
	if got.Job == nil || got.Job.Meta["planned"] != "yes" {
		t.Fatalf("placement job = %+v, want the request's job", got.Job)
	}
	gotOther, err := s.AllocByID(nil, other.ID)
	must(t, err)
	if gotOther.Job != nil {
		t.Fatalf("a placement of another job took the request's job: %+v", gotOther.Job)
	}
}
