package fsm

import (
	"testing"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestFSMPeriodicLaunchDedupesAndSurvivesSnapshot: a launch applies once
// per cron time whoever proposes it (the same entry again, or an older
// time, changes nothing); prohibit_overlap records a skipped time; the
// launch record travels in snapshots.
func TestFSMPeriodicLaunchDedupesAndSurvivesSnapshot(t *testing.T) {
	tf := newTestFSM(t)
	parent := statetest.BatchJob(0)
	parent.Periodic = &structs.PeriodicConfig{Enabled: true, Specs: []string{"* * * * *"}, SpecType: "cron", ProhibitOverlap: true}
	if r := tf.applyMsg(t, 1, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent}); r != nil {
		t.Fatal(r)
	}
	launch := func(index uint64, at int64) *structs.ChildLaunchResult {
		t.Helper()
		child := parent.NewChild(structs.PeriodicChildID(parent.ID, at))
		eval := statetest.Eval(child)
		r := tf.applyMsg(t, index, structs.PeriodicLaunchRequestType, &structs.PeriodicLaunchRequest{ParentID: parent.ID, Launch: at, Child: child, Eval: eval})
		res, ok := r.(*structs.ChildLaunchResult)
		if !ok {
			t.Fatalf("launch at %d: %v", at, r)
		}
		return res
	}
	if res := launch(2, 60); !res.Created || res.Skipped != "" {
		t.Fatalf("first launch %+v", res)
	}
	before := tf.hash(t)
	if res := launch(3, 60); res.Created || res.Skipped != state.SkipDecided {
		t.Fatalf("same time again %+v", res)
	}
	if res := launch(4, 0); res.Created || res.Skipped != state.SkipDecided {
		t.Fatalf("older time %+v", res)
	}
	if tf.hash(t) != before {
		t.Fatal("a repeated launch changed the state")
	}
	if res := launch(5, 120); res.Created || res.Skipped != state.SkipOverlap {
		t.Fatalf("overlapping launch %+v", res)
	}
	l, err := tf.State().PeriodicLaunchByID(nil, parent.ID)
	if err != nil || l == nil || l.Launch != 120 {
		t.Fatalf("launch record %+v %v", l, err)
	}
	b := snapshotBytes(t, tf.FSM)
	other := newTestFSM(t)
	if err := restoreBytes(other.FSM, b); err != nil {
		t.Fatal(err)
	}
	if other.hash(t) != tf.hash(t) {
		t.Fatal("restored state differs")
	}
	if l, _ := other.State().PeriodicLaunchByID(nil, parent.ID); l == nil || l.Launch != 120 {
		t.Fatalf("restored launch record %+v", l)
	}
	bad := parent.NewChild("other/periodic-1")
	if r := tf.applyMsg(t, 6, structs.PeriodicLaunchRequestType, &structs.PeriodicLaunchRequest{ParentID: parent.ID, Launch: 1, Child: bad, Eval: statetest.Eval(bad)}); r == nil {
		t.Fatal("a child not named for its parent and time was applied")
	}
}

// TestFSMReleaseNeverPassesTheLimit: a release entry that names more held
// children than the limit has room for releases only what fits, oldest
// first.
func TestFSMReleaseNeverPassesTheLimit(t *testing.T) {
	tf := newTestFSM(t)
	parent := statetest.BatchJob(0)
	parent.ParameterizedJob = &structs.ParameterizedJobConfig{Payload: "optional"}
	parent.MaxRunningChildren = 1
	if r := tf.applyMsg(t, 1, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent}); r != nil {
		t.Fatal(r)
	}
	var children []*structs.Job
	for i := 0; i < 3; i++ {
		c := parent.NewChild(structs.DispatchChildID(parent.ID, int64(i), structs.GenerateUUID()))
		c.Dispatched = true
		r := tf.applyMsg(t, uint64(2+i), structs.JobDispatchRequestType, &structs.JobDispatchRequest{Child: c, Eval: statetest.Eval(c)})
		if res, ok := r.(*structs.ChildLaunchResult); !ok || !res.Created || res.Held != (i > 0) {
			t.Fatalf("dispatch %d: %+v", i, r)
		}
		children = append(children, c)
	}
	evals := []*structs.Evaluation{statetest.Eval(children[1]), statetest.Eval(children[2])}
	if r := tf.applyMsg(t, 10, structs.JobChildrenReleaseRequestType, &structs.JobChildrenReleaseRequest{ParentID: parent.ID, Evals: evals}); len(r.([]string)) != 0 {
		t.Fatalf("released %v while the one running child holds the only place", r)
	}
	// The running child is stopped: one place.
	if r := tf.applyMsg(t, 11, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{JobID: children[0].ID, Eval: statetest.Eval(children[0])}); r != nil {
		t.Fatal(r)
	}
	r := tf.applyMsg(t, 12, structs.JobChildrenReleaseRequestType, &structs.JobChildrenReleaseRequest{ParentID: parent.ID, Evals: evals})
	if got, _ := r.([]string); len(got) != 1 || got[0] != children[1].ID {
		t.Fatalf("released %v, want only the oldest held %q", r, children[1].ID)
	}
}
