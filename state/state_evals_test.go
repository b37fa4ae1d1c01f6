package state

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestUpsertEvals(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	must(t, s.UpsertJob(1, job))
	e := statetest.Eval(job)
	must(t, s.UpsertEvals(2, []*structs.Evaluation{e}))
	e.Status = structs.EvalStatusFailed // must not reach the store
	got, err := s.EvalByID(nil, e.ID)
	must(t, err)
	if got.Status != structs.EvalStatusPending || got.CreateIndex != 2 || got.ModifyIndex != 2 {
		t.Fatalf("eval = %+v", got)
	}
	upd := got.Copy()
	upd.Status = structs.EvalStatusComplete
	must(t, s.UpsertEvals(3, []*structs.Evaluation{upd}))
	got, err = s.EvalByID(nil, e.ID)
	must(t, err)
	if got.Status != structs.EvalStatusComplete || got.CreateIndex != 2 || got.ModifyIndex != 3 {
		t.Fatalf("updated eval = %+v", got)
	}
	if idx := mustIndex(t, s, TableEvals); idx != 3 {
		t.Fatalf("evals index = %d", idx)
	}
	for _, bad := range [][]*structs.Evaluation{{nil}, {{JobID: job.ID}}, {statetest.Eval(job), nil}} {
		if err := s.UpsertEvals(4, bad); !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	}
	all, err := s.Evals(nil)
	must(t, err)
	if len(all) != 1 || mustIndex(t, s, TableEvals) != 3 {
		t.Fatalf("a failed upsert wrote: %d evals", len(all))
	}
}

func TestDeleteEvals(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(0)
	node := statetest.Node(0)
	must(t, s.UpsertJob(1, job))
	e1, e2 := statetest.Eval(job), statetest.Eval(job)
	a1, a2 := statetest.Alloc(job, node), statetest.Alloc(job, node)
	must(t, s.UpsertEvals(2, []*structs.Evaluation{e1, e2}))
	must(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a1, a2}}))
	must(t, s.UpdateAllocsFromClient(4, []*structs.Allocation{{ID: a1.ID, ClientStatus: "complete"}, {ID: a2.ID, ClientStatus: "complete"}}, 1))
	if st := mustJob(t, s, job.ID).Status; st != structs.JobStatusPending {
		t.Fatalf("status with pending evals = %s", st)
	}

	must(t, s.DeleteEvals(5, []string{e1.ID, e2.ID, "missing"}, []string{a1.ID, "missing"}))
	evals, err := s.EvalsByJob(nil, job.ID)
	must(t, err)
	allocs, err := s.AllocsByJob(nil, job.ID)
	must(t, err)
	if len(evals) != 0 || len(allocs) != 1 || allocs[0].ID != a2.ID {
		t.Fatalf("left %d evals, %d allocs", len(evals), len(allocs))
	}
	for _, table := range []string{TableEvals, TableAllocs, TableJobs} {
		if idx := mustIndex(t, s, table); idx != 5 {
			t.Fatalf("%s index = %d, want 5", table, idx)
		}
	}
	if st := mustJob(t, s, job.ID).Status; st != structs.JobStatusDead {
		t.Fatalf("status after gc = %s, want dead", st)
	}
}
