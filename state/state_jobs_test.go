package state

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestUpsertJobVersions(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	job.SubmitTime = 100
	must(t, s.UpsertJob(5, job))
	got := mustJob(t, s, job.ID)
	if got.CreateIndex != 5 || got.ModifyIndex != 5 || got.JobModifyIndex != 5 || got.Version != 0 || got.Status != structs.JobStatusPending {
		t.Fatalf("first insert = create %d modify %d jobmodify %d version %d status %s",
			got.CreateIndex, got.ModifyIndex, got.JobModifyIndex, got.Version, got.Status)
	}

	// Changing the input after insert must not change what is stored.
	job.TaskGroups[0].Count = 9
	job.TaskGroups[0].Tasks[0].Config["command"] = "/bin/false"
	if got := mustJob(t, s, job.ID); got.TaskGroups[0].Count != 1 || got.TaskGroups[0].Tasks[0].Config["command"] != "/bin/sleep" {
		t.Fatalf("stored job changed with its input")
	}

	// The same spec as a msgpack round trip (as the FSM sees it), with new
	// submit time and status fields: no new version.
	buf, err := structs.Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: mustJob(t, s, job.ID)})
	must(t, err)
	var req structs.JobRegisterRequest
	must(t, structs.Decode(buf[1:], &req))
	same := req.Job
	same.SubmitTime = 200
	same.Status = "whatever"
	same.Version = 42
	same.TaskGroups[0].Tasks[0].Resources.Devices = nil // nil and empty are the same spec

	changed := mustJob(t, s, job.ID).Copy()
	changed.TaskGroups[0].Count = 3

	stopped := changed.Copy()
	stopped.Stop = true

	steps := []struct {
		name            string
		index           uint64
		job             *structs.Job
		wantVersion     uint64
		wantJobModify   uint64
		wantStatus      string
		wantCreateIndex uint64
	}{
		{"same spec", 6, same, 0, 5, structs.JobStatusPending, 5},
		{"changed count", 7, changed, 1, 7, structs.JobStatusPending, 5},
		{"changed again to same", 8, changed, 1, 7, structs.JobStatusPending, 5},
		{"stopped", 9, stopped, 2, 9, structs.JobStatusDead, 5},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			must(t, s.UpsertJob(st.index, st.job))
			got := mustJob(t, s, job.ID)
			if got.Version != st.wantVersion || got.JobModifyIndex != st.wantJobModify || got.ModifyIndex != st.index ||
				got.Status != st.wantStatus || got.CreateIndex != st.wantCreateIndex {
				t.Fatalf("version %d jobmodify %d modify %d status %s create %d; want %d %d %d %s %d",
					got.Version, got.JobModifyIndex, got.ModifyIndex, got.Status, got.CreateIndex,
					st.wantVersion, st.wantJobModify, st.index, st.wantStatus, st.wantCreateIndex)
			}
			if idx := mustIndex(t, s, TableJobs); idx != st.index {
				t.Fatalf("jobs index = %d, want %d", idx, st.index)
			}
		})
	}
}

func TestUpsertJobInvalid(t *testing.T) {
	s := testStore(t)
	for _, j := range []*structs.Job{nil, {Name: "no id"}} {
		if err := s.UpsertJob(1, j); !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	}
}

func TestDeleteJobKeepsAllocsAndEvals(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	node := statetest.Node(0)
	alloc := statetest.Alloc(job, node)
	eval := statetest.Eval(job)
	must(t, s.UpsertJob(1, job))
	must(t, s.UpsertEvals(2, []*structs.Evaluation{eval}))
	must(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{alloc}}))

	if err := s.DeleteJob(4, "missing"); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	must(t, s.DeleteJob(5, job.ID))
	if j, err := s.JobByID(nil, job.ID); j != nil || err != nil {
		t.Fatalf("job after delete = %v, %v", j, err)
	}
	if idx := mustIndex(t, s, TableJobs); idx != 5 {
		t.Fatalf("jobs index = %d", idx)
	}
	allocs, err := s.AllocsByJob(nil, job.ID)
	must(t, err)
	evals, err := s.EvalsByJob(nil, job.ID)
	must(t, err)
	if len(allocs) != 1 || len(evals) != 1 {
		t.Fatalf("purge removed allocs (%d) or evals (%d)", len(allocs), len(evals))
	}
}

// TestJobStatus covers each rule of jobStatusTxn.
func TestJobStatus(t *testing.T) {
	type allocState struct{ desired, client string }
	cases := []struct {
		name      string
		batch     bool
		stop      bool
		allocs    []allocState
		evalState string // "" for no evaluation
		want      string
	}{
		{"registered, nothing yet", false, false, nil, "", structs.JobStatusPending},
		{"pending eval", false, false, nil, structs.EvalStatusPending, structs.JobStatusPending},
		{"blocked eval", true, false, nil, structs.EvalStatusBlocked, structs.JobStatusPending},
		{"alloc pending on client", false, false, []allocState{{"run", "pending"}}, structs.EvalStatusComplete, structs.JobStatusRunning},
		{"alloc running", true, false, []allocState{{"run", "running"}, {"run", "complete"}}, "", structs.JobStatusRunning},
		{"batch all complete", true, false, []allocState{{"run", "complete"}, {"run", "failed"}}, structs.EvalStatusComplete, structs.JobStatusDead},
		{"batch all complete, eval pending", true, false, []allocState{{"run", "complete"}}, structs.EvalStatusPending, structs.JobStatusPending},
		{"service all complete", false, false, []allocState{{"run", "complete"}}, structs.EvalStatusComplete, structs.JobStatusDead},
		{"service all failed, no eval", false, false, []allocState{{"run", "failed"}}, "", structs.JobStatusDead},
		{"count 0, eval complete", false, false, nil, structs.EvalStatusComplete, structs.JobStatusDead},
		{"batch count 0, eval complete", true, false, nil, structs.EvalStatusComplete, structs.JobStatusDead},
		{"stopped, alloc still on client", false, true, []allocState{{"stop", "running"}}, structs.EvalStatusPending, structs.JobStatusRunning},
		{"stopped, alloc finished", false, true, []allocState{{"stop", "complete"}}, structs.EvalStatusPending, structs.JobStatusDead},
		{"stopped, nothing placed", true, true, nil, structs.EvalStatusPending, structs.JobStatusDead},
		{"desired stop but not stopped job", true, false, []allocState{{"stop", "running"}}, "", structs.JobStatusDead},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testStore(t)
			job := statetest.Job()
			if c.batch {
				job = statetest.BatchJob(0)
			}
			node := statetest.Node(0)
			must(t, s.UpsertJob(1, job))
			var allocs []*structs.Allocation
			for _, as := range c.allocs {
				a := statetest.Alloc(job, node)
				a.DesiredStatus = as.desired
				allocs = append(allocs, a)
			}
			if len(allocs) > 0 {
				must(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{AllocsPlaced: allocs}))
				var upd []*structs.Allocation
				for i, as := range c.allocs {
					upd = append(upd, &structs.Allocation{ID: allocs[i].ID, ClientStatus: as.client})
				}
				must(t, s.UpdateAllocsFromClient(3, upd, 1000))
			}
			if c.evalState != "" {
				e := statetest.Eval(job)
				e.Status = c.evalState
				must(t, s.UpsertEvals(4, []*structs.Evaluation{e}))
			}
			if c.stop {
				j := mustJob(t, s, job.ID).Copy()
				j.Stop = true
				must(t, s.UpsertJob(5, j))
			}
			if got := mustJob(t, s, job.ID).Status; got != c.want {
				t.Fatalf("status = %s, want %s", got, c.want)
			}
		})
	}
}

func TestJobsSortedAndStatusBumpsIndex(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(0)
	job.ID = "b"
	other := statetest.Job()
	other.ID = "a"
	must(t, s.UpsertJob(1, job))
	must(t, s.UpsertJob(2, other))
	jobs, err := s.Jobs(nil)
	must(t, err)
	if len(jobs) != 2 || jobs[0].ID != "a" || jobs[1].ID != "b" {
		t.Fatalf("jobs not sorted: %v", jobs)
	}
	// A status change through an alloc update bumps the job's ModifyIndex
	// and the jobs table index, but not its JobModifyIndex or Version.
	a := statetest.Alloc(job, statetest.Node(0))
	must(t, s.UpsertPlanResults(7, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}}))
	got := mustJob(t, s, "b")
	if got.Status != structs.JobStatusRunning || got.ModifyIndex != 7 || got.JobModifyIndex != 1 || got.Version != 0 {
		t.Fatalf("job = status %s modify %d jobmodify %d version %d", got.Status, got.ModifyIndex, got.JobModifyIndex, got.Version)
	}
	if idx := mustIndex(t, s, TableJobs); idx != 7 {
		t.Fatalf("jobs index = %d, want 7", idx)
	}
}
