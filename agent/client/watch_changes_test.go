package client

import (
	"context"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// fakeChanges is an AllocChangesConn over a map of allocations.
type fakeChanges struct {
	allocs  map[string]*structs.Allocation
	index   uint64
	hide    map[string]bool // fetch leaves these out
	fetched [][]string
	queries []*structs.QueryOptions
}

func (f *fakeChanges) NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error) {
	f.queries = append(f.queries, q)
	out := map[string]uint64{}
	for id, a := range f.allocs {
		out[id] = a.AllocModifyIndex
	}
	return out, structs.QueryMeta{Index: f.index}, nil
}

func (f *fakeChanges) NodeFetchAllocs(ctx context.Context, nodeID string, ids []string, q *structs.QueryOptions) (*structs.NodeFetchAllocsHTTPResponse, structs.QueryMeta, error) {
	f.fetched = append(f.fetched, ids)
	job := &structs.Job{ID: "j", ModifyIndex: 3}
	out := &structs.NodeFetchAllocsHTTPResponse{Jobs: []*structs.Job{job}}
	for _, id := range ids {
		if a := f.allocs[id]; a != nil && !f.hide[id] {
			c := *a
			out.Allocs = append(out.Allocs, &structs.NodeFetchedAlloc{Alloc: &c, JobIndex: 3})
		}
	}
	return out, structs.QueryMeta{Index: f.index}, nil
}

// TestAllocTrackerFetchesOnlyWhatChanged: the first call fetches every
// allocation (with its job attached), the next only the one whose
// AllocModifyIndex moved; a removed allocation drops out; one the fetch
// left out is asked for again without the index moving on; queries are
// stale.
func TestAllocTrackerFetchesOnlyWhatChanged(t *testing.T) {
	f := &fakeChanges{index: 10, hide: map[string]bool{}, allocs: map[string]*structs.Allocation{
		"a": {ID: "a", JobID: "j", AllocModifyIndex: 5}, "b": {ID: "b", JobID: "j", AllocModifyIndex: 6},
	}}
	tr := NewAllocTracker(f, "n1")
	ctx := context.Background()
	all, changed, err := tr.Next(ctx, time.Second)
	if err != nil || len(all) != 2 || len(changed) != 2 || all[0].Job == nil || all[0].Job.ID != "j" {
		t.Fatalf("first: all %v changed %v err %v", all, changed, err)
	}
	if q := f.queries[0]; !q.AllowStale || q.MinQueryIndex != 0 {
		t.Fatalf("first query %+v", q)
	}

	f.index = 12
	f.allocs["b"] = &structs.Allocation{ID: "b", JobID: "j", AllocModifyIndex: 12, DesiredStatus: structs.AllocDesiredStatusStop}
	delete(f.allocs, "a")
	all, changed, err = tr.Next(ctx, time.Second)
	if err != nil || len(all) != 1 || all[0].ID != "b" || len(changed) != 1 || changed[0].DesiredStatus != structs.AllocDesiredStatusStop {
		t.Fatalf("second: all %v changed %v err %v", all, changed, err)
	}
	if got := f.fetched[len(f.fetched)-1]; len(got) != 1 || got[0] != "b" {
		t.Fatalf("second fetch asked for %v, want only b", got)
	}
	if q := f.queries[1]; q.MinQueryIndex != 10 {
		t.Fatalf("second query from index %d, want 10", q.MinQueryIndex)
	}

	f.index = 14
	f.allocs["c"] = &structs.Allocation{ID: "c", JobID: "j", AllocModifyIndex: 14}
	f.hide["c"] = true
	if all, _, err = tr.Next(ctx, time.Second); err != nil || len(all) != 1 {
		t.Fatalf("third: all %v err %v", all, err)
	}
	delete(f.hide, "c")
	all, changed, err = tr.Next(ctx, time.Second)
	if err != nil || len(all) != 2 || len(changed) != 1 || changed[0].ID != "c" {
		t.Fatalf("fourth: all %v changed %v err %v", all, changed, err)
	}
	if q := f.queries[3]; q.MinQueryIndex != 12 {
		t.Fatalf("after a short fetch the query went on from index %d, want 12 (not past it)", q.MinQueryIndex)
	}
}

// TestAllocTrackerAssumesOwnStatus: a final status the client resent
// itself is kept in the tracker's copy, so the next wake-up does not see
// the stale one again (and resend it), without a fetch.
func TestAllocTrackerAssumesOwnStatus(t *testing.T) {
	f := &fakeChanges{index: 4, hide: map[string]bool{}, allocs: map[string]*structs.Allocation{
		"a": {ID: "a", JobID: "j", AllocModifyIndex: 4, ClientStatus: structs.AllocClientStatusRunning}}}
	tr := NewAllocTracker(f, "n1")
	if _, _, err := tr.Next(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	tr.assumeClientStatus("a", structs.AllocClientStatusComplete)
	all, changed, err := tr.Next(context.Background(), time.Second)
	if err != nil || len(changed) != 0 || len(all) != 1 || all[0].ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("all %v changed %v err %v", all, changed, err)
	}
	if len(f.fetched) != 1 {
		t.Fatalf("%d fetches, want only the first", len(f.fetched))
	}
}
