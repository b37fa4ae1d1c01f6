package state

import (
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestJobStatusAfterGC checks that garbage collection (DeleteEvals) leaves a
// dead job dead when it removes the job's last evaluations and
// allocations, as Nomad's evalDelete flag does, while a job that still has
// a pending evaluation stays pending.
func TestJobStatusAfterGC(t *testing.T) {
	cases := []struct {
		name       string
		count      int
		evals      []string // statuses, in order
		allocs     []string // client statuses
		deleteAll  bool     // delete every evaluation and allocation; else all but the last evaluation
		before     string
		wantStatus string
	}{
		{"service count 0, eval complete", 0, []string{structs.EvalStatusComplete}, nil, true, structs.JobStatusDead, structs.JobStatusDead},
		{"service count 0, evals complete and failed", 0, []string{structs.EvalStatusComplete, structs.EvalStatusFailed}, nil, true, structs.JobStatusDead, structs.JobStatusDead},
		{"service, allocs failed", 1, []string{structs.EvalStatusComplete}, []string{structs.AllocClientStatusFailed}, true, structs.JobStatusDead, structs.JobStatusDead},
		{"terminal eval collected, pending one kept", 0, []string{structs.EvalStatusComplete, structs.EvalStatusPending}, nil, false, structs.JobStatusPending, structs.JobStatusPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			job := statetest.Job()
			job.TaskGroups[0].Count = tc.count
			must(t, s.UpsertJob(1, job))
			var evalIDs, allocIDs []string
			for _, st := range tc.evals {
				e := statetest.Eval(job)
				e.Status = st
				must(t, s.UpsertEvals(2, []*structs.Evaluation{e}))
				evalIDs = append(evalIDs, e.ID)
			}
			node := statetest.Node(0)
			for _, cs := range tc.allocs {
				a := statetest.Alloc(job, node)
				must(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}}))
				must(t, s.UpdateAllocsFromClient(4, []*structs.Allocation{{ID: a.ID, ClientStatus: cs}}, 1))
				allocIDs = append(allocIDs, a.ID)
			}
			if got := mustJob(t, s, job.ID).Status; got != tc.before {
				t.Fatalf("status before gc = %s, want %s", got, tc.before)
			}
			if !tc.deleteAll {
				evalIDs = evalIDs[:len(evalIDs)-1]
			}
			must(t, s.DeleteEvals(5, evalIDs, allocIDs))
			if got := mustJob(t, s, job.ID).Status; got != tc.wantStatus {
				t.Fatalf("status after gc = %s, want %s", got, tc.wantStatus)
			}
			// A later registration's evaluation still makes it pending.
			e := statetest.Eval(job)
			must(t, s.UpsertEvals(6, []*structs.Evaluation{e}))
			if got := mustJob(t, s, job.ID).Status; got != structs.JobStatusPending {
				t.Fatalf("status with a new pending evaluation = %s, want pending", got)
			}
		})
	}
}
