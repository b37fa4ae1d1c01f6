package state

import (
	"context"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// jobsQuery lists jobs and returns the jobs table index.
func jobsQuery(ws memdb.WatchSet, s *StateStore) (interface{}, uint64, error) {
	jobs, err := s.Jobs(ws)
	if err != nil {
		return nil, 0, err
	}
	idx, err := s.Index(TableJobs)
	return jobs, idx, err
}

type bqResult struct {
	resp  interface{}
	index uint64
	err   error
}

func runBlocking(ctx context.Context, s *StateStore, minIndex uint64) <-chan bqResult {
	ch := make(chan bqResult, 1)
	go func() {
		resp, idx, err := s.BlockingQuery(ctx, minIndex, jobsQuery)
		ch <- bqResult{resp, idx, err}
	}()
	return ch
}

func TestBlockingQuery(t *testing.T) {
	t.Run("returns at once when index is newer", func(t *testing.T) {
		s := testStore(t)
		must(t, s.UpsertJob(5, statetest.Job()))
		_, idx, err := s.BlockingQuery(context.Background(), 4, jobsQuery)
		if err != nil || idx != 5 {
			t.Fatalf("idx %d err %v", idx, err)
		}
	})
	t.Run("index is at least 1 on an empty store", func(t *testing.T) {
		s := testStore(t)
		_, idx, err := s.BlockingQuery(context.Background(), 0, jobsQuery)
		if err != nil || idx != 1 {
			t.Fatalf("idx %d err %v", idx, err)
		}
	})
	t.Run("wakes on change", func(t *testing.T) {
		s := testStore(t)
		must(t, s.UpsertJob(5, statetest.Job()))
		ch := runBlocking(context.Background(), s, 5)
		select {
		case r := <-ch:
			t.Fatalf("returned before any change: %+v", r)
		case <-time.After(50 * time.Millisecond):
		}
		must(t, s.UpsertJob(6, statetest.Job()))
		select {
		case r := <-ch:
			if r.err != nil || r.index != 6 || len(r.resp.([]*structs.Job)) != 2 {
				t.Fatalf("result = %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("blocking query did not wake on a change")
		}
	})
	t.Run("ignores changes to unwatched tables", func(t *testing.T) {
		s := testStore(t)
		must(t, s.UpsertJob(5, statetest.Job()))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		ch := runBlocking(ctx, s, 5)
		must(t, s.UpsertNode(6, statetest.Node(0)))
		r := <-ch
		if r.err != nil || r.index != 5 || ctx.Err() == nil {
			t.Fatalf("result = %+v, ctx err %v", r, ctx.Err())
		}
	})
	t.Run("returns last result on timeout", func(t *testing.T) {
		s := testStore(t)
		must(t, s.UpsertJob(5, statetest.Job()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		r := <-runBlocking(ctx, s, 5)
		if r.err != nil || r.index != 5 || len(r.resp.([]*structs.Job)) != 1 {
			t.Fatalf("result = %+v", r)
		}
		if time.Since(start) < 25*time.Millisecond {
			t.Fatalf("returned after %s, before the timeout", time.Since(start))
		}
	})
	t.Run("returns when abandoned", func(t *testing.T) {
		s := testStore(t)
		must(t, s.UpsertJob(5, statetest.Job()))
		ch := runBlocking(context.Background(), s, 5)
		s.Abandon()
		s.Abandon() // twice is fine
		select {
		case r := <-ch:
			if r.err != nil || r.index != 5 {
				t.Fatalf("result = %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("blocking query did not return on abandon")
		}
	})
}

func TestSnapshotIsPointInTime(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	must(t, s.UpsertJob(1, job))
	snap, err := s.Snapshot()
	must(t, err)
	must(t, s.UpsertJob(2, statetest.Job()))
	must(t, s.DeleteJob(3, job.ID))
	jobs, err := snap.Jobs(nil)
	must(t, err)
	if len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("snapshot sees later writes: %v", jobs)
	}
	if idx, _ := snap.LatestIndex(); idx != 1 {
		t.Fatalf("snapshot index = %d", idx)
	}
}

// populate fills s with two nodes, two jobs (one stopped), allocs in each
// client state and evals.
func populate(t *testing.T, s *StateStore) {
	t.Helper()
	n1, n2 := statetest.Node(4), statetest.Node(0)
	must(t, s.UpsertNode(1, n1))
	must(t, s.UpsertNode(2, n2))
	train, web := statetest.BatchJob(2), statetest.Job()
	must(t, s.UpsertJob(3, train))
	must(t, s.UpsertJob(4, web))
	e1, e2 := statetest.Eval(train), statetest.Eval(web)
	e2.FailedTGAllocs = map[string]*structs.AllocMetric{"web": {NodesEvaluated: 2, DimensionExhausted: map[string]int{"memory": 1}}}
	must(t, s.UpsertEvals(5, []*structs.Evaluation{e1, e2}))
	a1, a2 := statetest.Alloc(train, n1), statetest.Alloc(web, n2)
	must(t, s.UpsertPlanResults(6, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a1, a2}, UpdatedAt: 100}))
	must(t, s.UpdateAllocsFromClient(7, []*structs.Allocation{{ID: a1.ID, ClientStatus: "running",
		TaskStates: map[string]*structs.TaskState{"server": {State: "running", Events: []*structs.TaskEvent{{Type: "Started", Time: 5}}}}}}, 200))
	stop := mustJob(t, s, web.ID).Copy()
	stop.Stop = true
	must(t, s.UpsertJob(8, stop))
}

// copyInto restores every object of src into a new store.
func copyInto(t *testing.T, src *StateStore) *StateStore {
	t.Helper()
	dst := testStore(t)
	r, err := dst.Restore()
	must(t, err)
	defer r.Abort()
	jobs, err := src.Jobs(nil)
	must(t, err)
	for _, j := range jobs {
		must(t, r.JobRestore(j))
	}
	nodes, err := src.Nodes(nil)
	must(t, err)
	for _, n := range nodes {
		must(t, r.NodeRestore(n))
	}
	allocs, err := src.Allocs(nil)
	must(t, err)
	for _, a := range allocs {
		must(t, r.AllocRestore(a))
	}
	evals, err := src.Evals(nil)
	must(t, err)
	for _, e := range evals {
		must(t, r.EvalRestore(e))
	}
	versions, err := src.AllJobVersions(nil)
	must(t, err)
	for _, v := range versions {
		must(t, r.JobVersionRestore(v))
	}
	for _, table := range indexedTables {
		must(t, r.IndexRestore(table, mustIndex(t, src, table)))
	}
	must(t, r.Commit())
	return dst
}

func TestRestoreRoundTripAndHash(t *testing.T) {
	src := testStore(t)
	populate(t, src)
	dst := copyInto(t, src)
	h1, err := src.Hash()
	must(t, err)
	h2, err := dst.Hash()
	must(t, err)
	if h1 != h2 {
		t.Fatalf("hash differs after restore: %s vs %s", h1, h2)
	}
	for _, table := range indexedTables {
		if a, b := mustIndex(t, src, table), mustIndex(t, dst, table); a != b {
			t.Fatalf("%s index %d vs %d", table, a, b)
		}
	}
	// One more write on one side changes its hash.
	must(t, dst.UpsertNode(9, statetest.Node(0)))
	h3, err := dst.Hash()
	must(t, err)
	if h3 == h1 {
		t.Fatal("hash did not change after a write")
	}
	// The hash is stable across calls.
	if again, _ := src.Hash(); again != h1 {
		t.Fatal("hash not stable")
	}
}

func TestRestoreInvalidAndAbort(t *testing.T) {
	s := testStore(t)
	r, err := s.Restore()
	must(t, err)
	cases := []struct {
		name string
		err  error
	}{
		{"nil job", r.JobRestore(nil)},
		{"nil node", r.NodeRestore(&structs.Node{})},
		{"nil alloc", r.AllocRestore(nil)},
		{"nil eval", r.EvalRestore(nil)},
		{"unknown table", r.IndexRestore("widgets", 3)},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	must(t, r.JobRestore(statetest.Job()))
	r.Abort()
	if jobs, _ := s.Jobs(nil); len(jobs) != 0 {
		t.Fatalf("aborted restore left %d jobs", len(jobs))
	}
}
