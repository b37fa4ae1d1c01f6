package state

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// gcFixture is a store holding one stopped job with an evaluation and a
// completed allocation, a second job with its own evaluation, and a down
// node.
type gcFixture struct {
	s            *StateStore
	job, other   *structs.Job
	eval, oEval  *structs.Evaluation
	alloc        *structs.Allocation
	node         *structs.Node
	jobIdx, nIdx uint64
}

func newGCFixture(t *testing.T) *gcFixture {
	t.Helper()
	f := &gcFixture{s: testStore(t), job: statetest.BatchJob(0), other: statetest.Job(), node: statetest.Node(0)}
	must(t, f.s.UpsertNode(1, f.node))
	must(t, f.s.UpsertJob(2, f.job))
	must(t, f.s.UpsertJob(3, f.other))
	f.eval, f.oEval = statetest.Eval(f.job), statetest.Eval(f.other)
	f.eval.Status, f.oEval.Status = structs.EvalStatusComplete, structs.EvalStatusComplete
	must(t, f.s.UpsertEvals(4, []*structs.Evaluation{f.eval, f.oEval}))
	f.alloc = statetest.Alloc(f.job, f.node)
	f.alloc.EvalID = f.eval.ID
	must(t, f.s.UpsertPlanResults(5, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{f.alloc}, UpdatedAt: 1}))
	must(t, f.s.UpdateAllocsFromClient(6, []*structs.Allocation{{ID: f.alloc.ID, ClientStatus: structs.AllocClientStatusComplete}}, 2))
	stopped := mustJob(t, f.s, f.job.ID).Copy()
	stopped.Stop = true
	must(t, f.s.UpsertJob(7, stopped))
	must(t, f.s.UpdateNodeStatus(8, f.node.ID, structs.NodeStatusDown, 3))
	f.jobIdx = mustJob(t, f.s, f.job.ID).ModifyIndex
	n, err := f.s.NodeByID(nil, f.node.ID)
	must(t, err)
	f.nIdx = n.ModifyIndex
	return f
}

func TestPurgeGC(t *testing.T) {
	cases := []struct {
		name string
		req  func(f *gcFixture) *structs.GCPurgeRequest
		// wantJob, wantEval, wantAlloc, wantNode: whether each is still
		// there afterwards; wantOther: whether the other job's evaluation
		// is.
		wantJob, wantEval, wantAlloc, wantNode, wantOther bool
		// bumped lists the tables whose index must be the purge's.
		bumped []string
	}{
		{
			name: "unchanged job and node go with what they list",
			req: func(f *gcFixture) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{
					Jobs:  []*structs.GCJobPurge{{JobID: f.job.ID, ModifyIndex: f.jobIdx, Evals: []string{f.eval.ID, "missing"}, Allocs: []string{f.alloc.ID}}},
					Nodes: []*structs.GCNodePurge{{NodeID: f.node.ID, ModifyIndex: f.nIdx}},
				}
			},
			wantOther: true,
			bumped:    []string{TableJobs, TableEvals, TableAllocs, TableNodes},
		},
		{
			name: "a job changed since keeps everything it lists",
			req: func(f *gcFixture) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{{JobID: f.job.ID, ModifyIndex: f.jobIdx - 1, Evals: []string{f.eval.ID}, Allocs: []string{f.alloc.ID}}}}
			},
			wantJob: true, wantEval: true, wantAlloc: true, wantNode: true, wantOther: true,
		},
		{
			name: "a node changed since stays",
			req: func(f *gcFixture) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{Nodes: []*structs.GCNodePurge{{NodeID: f.node.ID, ModifyIndex: f.nIdx + 1}}}
			},
			wantJob: true, wantEval: true, wantAlloc: true, wantNode: true, wantOther: true,
		},
		{
			name: "another job's evaluation listed under this job stays",
			req: func(f *gcFixture) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{{JobID: f.job.ID, ModifyIndex: f.jobIdx, Evals: []string{f.eval.ID, f.oEval.ID}}}}
			},
			wantAlloc: true, wantNode: true, wantOther: true,
			bumped: []string{TableJobs, TableEvals},
		},
		{
			name: "missing job and node are skipped",
			req: func(f *gcFixture) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{
					Jobs:  []*structs.GCJobPurge{{JobID: "missing", ModifyIndex: 1, Evals: []string{f.oEval.ID}}},
					Nodes: []*structs.GCNodePurge{{NodeID: "missing", ModifyIndex: 1}},
				}
			},
			wantJob: true, wantEval: true, wantAlloc: true, wantNode: true, wantOther: true,
		},
	}
	const index = 100
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newGCFixture(t)
			before := map[string]uint64{}
			for _, table := range []string{TableJobs, TableEvals, TableAllocs, TableNodes} {
				before[table] = mustIndex(t, f.s, table)
			}
			must(t, f.s.PurgeGC(index, c.req(f)))
			j, err := f.s.JobByID(nil, f.job.ID)
			must(t, err)
			e, err := f.s.EvalByID(nil, f.eval.ID)
			must(t, err)
			a, err := f.s.AllocByID(nil, f.alloc.ID)
			must(t, err)
			n, err := f.s.NodeByID(nil, f.node.ID)
			must(t, err)
			o, err := f.s.EvalByID(nil, f.oEval.ID)
			must(t, err)
			got := []bool{j != nil, e != nil, a != nil, n != nil, o != nil}
			want := []bool{c.wantJob, c.wantEval, c.wantAlloc, c.wantNode, c.wantOther}
			for i, name := range []string{"job", "eval", "alloc", "node", "other job's eval"} {
				if got[i] != want[i] {
					t.Errorf("%s present = %v, want %v", name, got[i], want[i])
				}
			}
			bumped := map[string]bool{}
			for _, table := range c.bumped {
				bumped[table] = true
			}
			for table, was := range before {
				wantIdx := was
				if bumped[table] {
					wantIdx = index
				}
				if idx := mustIndex(t, f.s, table); idx != wantIdx {
					t.Errorf("%s index = %d, want %d", table, idx, wantIdx)
				}
			}
		})
	}
}

func TestPurgeGCRejectsMalformed(t *testing.T) {
	cases := []struct {
		name string
		req  *structs.GCPurgeRequest
	}{
		{"nil request", nil},
		{"nil job entry", &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{nil}}},
		{"job entry without ID", &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{{ModifyIndex: 7}}}},
		{"nil node entry", &structs.GCPurgeRequest{Nodes: []*structs.GCNodePurge{nil}}},
		{"node entry without ID", &structs.GCPurgeRequest{Nodes: []*structs.GCNodePurge{{ModifyIndex: 8}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newGCFixture(t)
			h, err := f.s.Hash()
			must(t, err)
			// A valid entry rides along: it must not be applied either.
			if c.req != nil {
				c.req.Jobs = append([]*structs.GCJobPurge{{JobID: f.job.ID, ModifyIndex: f.jobIdx}}, c.req.Jobs...)
			}
			if err := f.s.PurgeGC(100, c.req); !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			after, err := f.s.Hash()
			must(t, err)
			if after != h {
				t.Fatal("a rejected purge changed the state")
			}
		})
	}
}

func TestAllocsByEval(t *testing.T) {
	f := newGCFixture(t)
	cases := []struct {
		name   string
		evalID string
		want   int
	}{
		{"eval with one allocation", f.eval.ID, 1},
		{"eval without allocations", f.oEval.ID, 0},
		{"empty ID", "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := f.s.AllocsByEval(nil, c.evalID)
			must(t, err)
			if len(got) != c.want {
				t.Fatalf("got %d allocations, want %d", len(got), c.want)
			}
			for _, a := range got {
				if a.EvalID != c.evalID {
					t.Fatalf("allocation %s has eval %s", a.ID, a.EvalID)
				}
			}
		})
	}
}
