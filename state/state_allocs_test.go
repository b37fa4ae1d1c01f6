package state

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestUpsertPlanResults(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(1)
	node := statetest.Node(2)
	must(t, s.UpsertJob(1, job))
	placed := statetest.Alloc(job, node)
	placed.Job = nil // the store attaches the stored job
	placed.ClientStatus = ""
	blocked := statetest.Eval(job)
	blocked.Status = structs.EvalStatusBlocked
	must(t, s.UpsertPlanResults(10, &structs.ApplyPlanResultsRequest{
		AllocsPlaced: []*structs.Allocation{placed},
		Evals:        []*structs.Evaluation{blocked},
		UpdatedAt:    5000,
	}))

	// Changing the input after insert must not change what is stored.
	placed.AllocatedResources.Tasks["server"].Devices[0].DeviceIDs[0] = "GPU-other"
	placed.NodeID = "elsewhere"

	got := mustAlloc(t, s, placed.ID)
	if got.NodeID != node.ID || got.DeviceIDs()[0] != node.NodeResources.Devices[0].Instances[0].ID {
		t.Fatalf("stored alloc changed with its input: node %s devices %v", got.NodeID, got.DeviceIDs())
	}
	if got.CreateIndex != 10 || got.ModifyIndex != 10 || got.AllocModifyIndex != 10 || got.CreateTime != 5000 ||
		got.ModifyTime != 5000 || got.ClientStatus != structs.AllocClientStatusPending || got.Job == nil || got.Job.ID != job.ID {
		t.Fatalf("placed alloc = %+v", got)
	}
	if e, err := s.EvalByID(nil, blocked.ID); err != nil || e == nil || e.CreateIndex != 10 {
		t.Fatalf("plan eval = %v, %v", e, err)
	}
	for _, table := range []string{TableAllocs, TableEvals, TableJobs} {
		if idx := mustIndex(t, s, table); idx != 10 {
			t.Fatalf("%s index = %d, want 10", table, idx)
		}
	}
	if st := mustJob(t, s, job.ID).Status; st != structs.JobStatusRunning {
		t.Fatalf("job status = %s", st)
	}

	// The client reports running; a re-placement of the same ID keeps
	// client fields and CreateIndex.
	must(t, s.UpdateAllocsFromClient(11, []*structs.Allocation{{
		ID: placed.ID, ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"server": {State: structs.TaskStateRunning}},
	}}, 6000))
	re := mustAlloc(t, s, placed.ID).Copy()
	re.ClientStatus = structs.AllocClientStatusPending
	re.TaskStates = nil
	re.DesiredDescription = "updated in place"
	must(t, s.UpsertPlanResults(12, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{re}, UpdatedAt: 7000}))
	got = mustAlloc(t, s, placed.ID)
	if got.CreateIndex != 10 || got.CreateTime != 5000 || got.AllocModifyIndex != 12 || got.ClientStatus != structs.AllocClientStatusRunning ||
		got.TaskStates["server"].State != structs.TaskStateRunning || got.DesiredDescription != "updated in place" {
		t.Fatalf("re-placed alloc = %+v", got)
	}

	// A stop copies the stored alloc; unknown stops are skipped.
	must(t, s.UpsertPlanResults(13, &structs.ApplyPlanResultsRequest{
		AllocsStopped: []*structs.Allocation{
			{ID: placed.ID, DesiredStatus: structs.AllocDesiredStatusStop, DesiredDescription: "alloc not needed"},
			{ID: "unknown", DesiredStatus: structs.AllocDesiredStatusStop},
		},
		UpdatedAt: 8000,
	}))
	got = mustAlloc(t, s, placed.ID)
	if got.DesiredStatus != structs.AllocDesiredStatusStop || got.DesiredDescription != "alloc not needed" ||
		got.ModifyIndex != 13 || got.AllocModifyIndex != 13 || got.ModifyTime != 8000 || got.NodeID != node.ID ||
		got.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("stopped alloc = %+v", got)
	}
	if a, _ := s.AllocByID(nil, "unknown"); a != nil {
		t.Fatal("a stop of an unknown alloc created it")
	}
	if !got.HoldsResources() {
		t.Fatal("a stopped alloc still running on its client must hold resources")
	}
}

func TestUpsertPlanResultsInvalid(t *testing.T) {
	job := statetest.Job()
	node := statetest.Node(0)
	malformed := statetest.Alloc(job, node)
	malformed.AllocatedResources.Tasks["nil"] = nil
	cases := []struct {
		name string
		req  *structs.ApplyPlanResultsRequest
	}{
		{"nil request", nil},
		{"nil placement", &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{nil}}},
		{"placement without id", &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{{JobID: job.ID}}}},
		{"nil stop", &structs.ApplyPlanResultsRequest{AllocsStopped: []*structs.Allocation{nil}}},
		{"malformed placement", &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{malformed}}},
		{"good placement, nil eval", &structs.ApplyPlanResultsRequest{
			AllocsPlaced: []*structs.Allocation{statetest.Alloc(job, node)}, Evals: []*structs.Evaluation{nil}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testStore(t)
			err := s.UpsertPlanResults(3, c.req)
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if all, _ := s.Allocs(nil); len(all) != 0 {
				t.Fatalf("a failed plan wrote %d allocs", len(all))
			}
			if idx, _ := s.LatestIndex(); idx != 0 {
				t.Fatalf("a failed plan moved the index to %d", idx)
			}
		})
	}
}

func TestUpdateAllocsFromClient(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(0)
	node := statetest.Node(0)
	alloc := statetest.Alloc(job, node)
	must(t, s.UpsertJob(1, job))
	must(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{alloc}}))

	update := &structs.Allocation{
		ID:                alloc.ID,
		ClientStatus:      structs.AllocClientStatusComplete,
		ClientDescription: "all tasks ran",
		TaskStates: map[string]*structs.TaskState{"server": {
			State: structs.TaskStateDead, Events: []*structs.TaskEvent{{Type: structs.TaskEventTerminated, Details: map[string]string{"exit_code": "0"}}},
		}},
		// Server-side fields in a client update are ignored.
		NodeID:        "other",
		DesiredStatus: structs.AllocDesiredStatusEvict,
	}
	must(t, s.UpdateAllocsFromClient(3, []*structs.Allocation{update, {ID: "unknown", ClientStatus: "failed"}}, 9000))
	update.TaskStates["server"].Events[0].Details["exit_code"] = "1"

	got := mustAlloc(t, s, alloc.ID)
	if got.ClientStatus != structs.AllocClientStatusComplete || got.ClientDescription != "all tasks ran" ||
		got.NodeID != node.ID || got.DesiredStatus != structs.AllocDesiredStatusRun ||
		got.ModifyIndex != 3 || got.AllocModifyIndex != 2 || got.ModifyTime != 9000 {
		t.Fatalf("alloc = %+v", got)
	}
	if d := got.TaskStates["server"].Events[0].Details["exit_code"]; d != "0" {
		t.Fatalf("stored task state changed with its input: exit_code %s", d)
	}
	if a, _ := s.AllocByID(nil, "unknown"); a != nil {
		t.Fatal("unknown alloc was created")
	}
	if st := mustJob(t, s, job.ID).Status; st != structs.JobStatusDead {
		t.Fatalf("batch job status = %s, want dead", st)
	}
	if idx := mustIndex(t, s, TableAllocs); idx != 3 {
		t.Fatalf("allocs index = %d", idx)
	}

	// An update of only unknown allocs changes nothing, index included.
	must(t, s.UpdateAllocsFromClient(4, []*structs.Allocation{{ID: "unknown"}}, 1))
	if idx := mustIndex(t, s, TableAllocs); idx != 3 {
		t.Fatalf("allocs index after a no-op update = %d", idx)
	}
	if err := s.UpdateAllocsFromClient(5, []*structs.Allocation{nil}, 1); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("nil update: %v", err)
	}
}

func TestAllocReads(t *testing.T) {
	s := testStore(t)
	job1, job2 := statetest.Job(), statetest.Job()
	n1, n2 := statetest.Node(0), statetest.Node(0)
	ids := []string{"aaaa1111", "aaaa2222", "bbbb1111"}
	specs := []struct {
		job  *structs.Job
		node *structs.Node
	}{{job1, n1}, {job1, n2}, {job2, n1}}
	var allocs []*structs.Allocation
	for i, sp := range specs {
		a := statetest.Alloc(sp.job, sp.node)
		a.ID = ids[len(ids)-1-i] // insert out of order
		allocs = append(allocs, a)
	}
	must(t, s.UpsertPlanResults(1, &structs.ApplyPlanResultsRequest{AllocsPlaced: allocs}))
	idsOf := func(as []*structs.Allocation, err error) []string {
		t.Helper()
		must(t, err)
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	cases := []struct {
		name string
		got  []string
		want []string
	}{
		{"all", idsOf(s.Allocs(nil)), []string{"aaaa1111", "aaaa2222", "bbbb1111"}},
		{"by job1", idsOf(s.AllocsByJob(nil, job1.ID)), []string{"aaaa2222", "bbbb1111"}},
		{"by job2", idsOf(s.AllocsByJob(nil, job2.ID)), []string{"aaaa1111"}},
		{"by node1", idsOf(s.AllocsByNode(nil, n1.ID)), []string{"aaaa1111", "bbbb1111"}},
		{"by missing node", idsOf(s.AllocsByNode(nil, "nope")), nil},
		{"by empty node", idsOf(s.AllocsByNode(nil, "")), nil},
		{"prefix aaaa", idsOf(s.AllocsByIDPrefix(nil, "aaaa")), []string{"aaaa1111", "aaaa2222"}},
		{"prefix b", idsOf(s.AllocsByIDPrefix(nil, "b")), []string{"bbbb1111"}},
		{"prefix none", idsOf(s.AllocsByIDPrefix(nil, "c")), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.got) != len(c.want) {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
			for i := range c.got {
				if c.got[i] != c.want[i] {
					t.Fatalf("got %v, want %v", c.got, c.want)
				}
			}
		})
	}
}

// TestAllocVersionsShareParts: a client update and a stop make a new
// version that shares the parts they do not change (resources, job) with
// the stored one instead of copying them, and leaves the stored version
// exactly as it was (state objects are immutable after insert: readers of
// an older snapshot, and the event stream, still hold it).
func TestAllocVersionsShareParts(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(1)
	node := statetest.Node(2)
	must(t, s.UpsertJob(1, job))
	first := statetest.Alloc(job, node)
	must(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{first}}))
	placed := mustAlloc(t, s, first.ID)
	before := placed.Copy()

	must(t, s.UpdateAllocsFromClient(3, []*structs.Allocation{{ID: placed.ID, ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"server": {State: structs.TaskStateRunning}}}}, 10))
	running := mustAlloc(t, s, placed.ID)
	must(t, s.UpsertPlanResults(4, &structs.ApplyPlanResultsRequest{AllocsStopped: []*structs.Allocation{{ID: placed.ID, DesiredDescription: "drained"}}}))
	stopped := mustAlloc(t, s, placed.ID)

	if running == placed || stopped == running {
		t.Fatal("an update changed the stored version in place")
	}
	if running.AllocatedResources != placed.AllocatedResources || stopped.AllocatedResources != placed.AllocatedResources || stopped.Job != placed.Job {
		t.Fatal("a new version copies the resources or job it does not change")
	}
	if stopped.TaskStates["server"] != running.TaskStates["server"] || stopped.DesiredStatus != structs.AllocDesiredStatusStop || stopped.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("stop version = desired %s client %s", stopped.DesiredStatus, stopped.ClientStatus)
	}
	if !reflect.DeepEqual(placed, before) {
		t.Fatalf("the placed version changed after later versions:\n%+v\nwant\n%+v", placed, before)
	}
	if running.ClientStatus != structs.AllocClientStatusRunning || running.ModifyIndex != 3 || placed.ModifyIndex != 2 || len(placed.TaskStates) != 0 {
		t.Fatalf("versions: placed %d %q, running %d %q", placed.ModifyIndex, placed.ClientStatus, running.ModifyIndex, running.ClientStatus)
	}
}

// TestPlacementsShareStoredJobVersion: placements of several plans carrying
// a decoded copy of the same job version (as every Raft entry does) all
// point at the stored version; a plan's job of another registration (a
// different JobModifyIndex) is kept as it came. The stored job is never
// mutated by either.
func TestPlacementsShareStoredJobVersion(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(1)
	node := statetest.Node(4)
	must(t, s.UpsertJob(1, job))
	stored := mustJob(t, s, job.ID)
	before := stored.Copy()
	var ids []string
	for i, index := range []uint64{2, 3} {
		a := statetest.Alloc(job, node)
		a.Job = nil
		a.Name = structs.AllocName(job.ID, "web", i)
		ids = append(ids, a.ID)
		must(t, s.UpsertPlanResults(index, &structs.ApplyPlanResultsRequest{Job: stored.Copy(), AllocsPlaced: []*structs.Allocation{a}}))
	}
	v, err := s.JobVersionsByID(nil, job.ID)
	must(t, err)
	for _, id := range ids {
		if got := mustAlloc(t, s, id).Job; got != v[0] {
			t.Fatalf("allocation %s holds its own copy of the job version, not the stored one", id)
		}
	}
	other := stored.Copy()
	other.JobModifyIndex++
	a := statetest.Alloc(job, node)
	a.Job = nil
	must(t, s.UpsertPlanResults(4, &structs.ApplyPlanResultsRequest{Job: other, AllocsPlaced: []*structs.Allocation{a}}))
	if got := mustAlloc(t, s, a.ID).Job; got == v[0] || got.JobModifyIndex != other.JobModifyIndex {
		t.Fatal("a plan's job of another registration was replaced by the stored version")
	}
	if after := mustJob(t, s, job.ID); after.JobModifyIndex != before.JobModifyIndex || after.Version != before.Version {
		t.Fatalf("stored job changed: %+v", after)
	}
}
