package server_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestUpdateAllocsRecordsOutputs: the endpoint passes a client update's
// Outputs and LogArchive into the Raft entry (it used to copy only the
// status fields), and refuses a malformed output path before Raft.
func TestUpdateAllocsRecordsOutputs(t *testing.T) {
	s := servertest.NewServer(t)
	node := statetest.Node(0)
	if _, err := s.NodeRegister(ctxT(t), node); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(0)
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	alloc := runningAllocs(t, s, job.ID, 1)[0]
	dig := strings.Repeat("0f", 32)
	if _, err := s.ArtifactUpsert(ctxT(t), &structs.Artifact{Digest: dig, Size: 7}); err != nil {
		t.Fatal(err)
	}
	err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusComplete,
		Outputs: []*structs.ArtifactRef{{Path: "main/result.json", Digest: dig, Size: 7}}, LogArchive: dig}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.AllocGet(ctxT(t), alloc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Outputs) != 1 || got.Outputs[0].Path != "main/result.json" || got.Outputs[0].Digest != dig || got.LogArchive != dig {
		t.Fatalf("outputs not recorded: %+v %q", got.Outputs, got.LogArchive)
	}
	err = s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusComplete,
		Outputs: []*structs.ArtifactRef{{Path: "/etc/passwd", Digest: dig}}}})
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "outputs[0]: path") {
		t.Fatalf("absolute output path: %v", err)
	}
}

// TestUpdateAllocsConcurrentCallersAllApplied: many clients' status updates
// arriving together (merged into shared Raft entries by the leader) are
// each applied, each caller returning only once its update is in the
// state, and a failed service allocation among them still gets its
// replacement evaluation.
func TestUpdateAllocsConcurrentCallersAllApplied(t *testing.T) {
	s := servertest.NewServer(t)
	node := statetest.Node(0)
	node.NodeResources.CPU, node.NodeResources.MemoryMB = 1<<20, 1<<22
	if _, err := s.NodeRegister(ctxT(t), node); err != nil {
		t.Fatal(err)
	}
	const n = 24
	batch := statetest.BatchJob(0)
	batch.TaskGroups[0].Count = n
	if _, err := s.JobRegister(ctxT(t), batch); err != nil {
		t.Fatal(err)
	}
	allocs := runningAllocs(t, s, batch.ID, n)
	svc := statetest.Job()
	if _, err := s.JobRegister(ctxT(t), svc); err != nil {
		t.Fatal(err)
	}
	failing := runningAllocs(t, s, svc.ID, 1)[0]
	evalsBefore, _, err := s.JobEvaluations(ctxT(t), svc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for _, a := range allocs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: a.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusComplete}}); err != nil {
				errs <- err
				return
			}
			got, _, err := s.AllocGet(ctxT(t), a.ID, nil)
			if err == nil && got.ClientStatus != structs.AllocClientStatusComplete {
				err = fmt.Errorf("%s is %q right after its update returned", a.ID, got.ClientStatus)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: failing.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusFailed}}); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	evals, _, err := s.JobEvaluations(ctxT(t), svc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) <= len(evalsBefore) {
		t.Fatalf("no evaluation for the failed service allocation: %d before, %d after", len(evalsBefore), len(evals))
	}
}

// TestUpdateAllocsMalformedRefusedBeforeRaft: a client update with a null
// task state or event, or an unknown client status, is refused to its
// caller before it takes a Raft entry. A null state used to reach the
// FSM, be refused there after committing, and, merged with other nodes'
// updates, make the whole merged entry fail and each of them be applied
// again alone; an unknown status ("bogus") was stored.
func TestUpdateAllocsMalformedRefusedBeforeRaft(t *testing.T) {
	s := servertest.NewServer(t)
	node := statetest.Node(0)
	if _, err := s.NodeRegister(ctxT(t), node); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(0)
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	alloc := runningAllocs(t, s, job.ID, 1)[0]
	// Nothing else writes once the job's evaluation is done.
	waittest.NoErr(t, 10*time.Second, "evaluation of "+job.ID+" complete", func() (bool, error) {
		evals, _, err := s.JobEvaluations(ctxT(t), job.ID, nil)
		done := len(evals) > 0
		for _, e := range evals {
			done = done && e.Status == structs.EvalStatusComplete
		}
		return done, err
	})
	lastIndex := func() string { return s.Stats()["raft.last_log_index"] }
	cases := map[string]*structs.Allocation{
		`state of task "t" is null`: {ID: alloc.ID, ClientStatus: structs.AllocClientStatusRunning, TaskStates: map[string]*structs.TaskState{"t": nil}},
		`event 0 is null`: {ID: alloc.ID, ClientStatus: structs.AllocClientStatusRunning,
			TaskStates: map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, Events: []*structs.TaskEvent{nil}}}},
		`unknown client status "bogus"`: {ID: alloc.ID, ClientStatus: "bogus"},
	}
	for want, upd := range cases {
		before := lastIndex()
		err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{upd})
		if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: UpdateAllocs = %v", want, err)
		}
		if after := lastIndex(); after != before {
			t.Errorf("%s: took Raft entries: last index %s, then %s", want, before, after)
		}
	}
	got, _, err := s.AllocGet(ctxT(t), alloc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.ClientStatus == "bogus" {
		t.Fatal("an unknown client status was stored")
	}
}
