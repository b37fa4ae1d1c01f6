package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestNodeClientAllocsAndFetch checks the client-only change protocol: the
// node's allocation IDs with AllocModifyIndex, a blocking query that a
// client's own status report does not wake but a stop does; and the fetch
// of named allocations without their jobs, each job version once, leaving
// out allocations of other nodes and refusing requests out of bounds.
func TestNodeClientAllocsAndFetch(t *testing.T) {
	s := servertest.NewServer(t)
	node := registerNode(t, s, 4)
	other := registerNode(t, s, 0)
	job := statetest.BatchJob(1)
	job.TaskGroups[0].Count = 3
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	allocs := runningAllocs(t, s, job.ID, 3)

	ids, meta, err := s.NodeClientAllocs(ctxT(t), node.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || meta.Index == 0 {
		t.Fatalf("ids %v index %d", ids, meta.Index)
	}
	for _, a := range allocs {
		if ids[a.ID] != a.AllocModifyIndex {
			t.Fatalf("alloc %s: index %d, want AllocModifyIndex %d", a.ID, ids[a.ID], a.AllocModifyIndex)
		}
	}

	want := []string{allocs[2].ID, "no-such-alloc", allocs[0].ID, allocs[1].ID}
	resp, _, err := s.NodeFetchAllocs(ctxT(t), node.ID, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Allocs) != 3 || len(resp.Jobs) != 1 || resp.Jobs[0].ID != job.ID {
		t.Fatalf("fetched %d allocations and %d jobs", len(resp.Allocs), len(resp.Jobs))
	}
	for _, fa := range resp.Allocs {
		if fa.Alloc.Job != nil || fa.JobIndex != resp.Jobs[0].ModifyIndex {
			t.Fatalf("fetched allocation %s carries its job (%v) or a wrong JobIndex %d", fa.Alloc.ID, fa.Alloc.Job != nil, fa.JobIndex)
		}
	}
	if resp.Allocs[0].Alloc.ID != allocs[2].ID {
		t.Fatalf("order: first %s, want %s", resp.Allocs[0].Alloc.ID, allocs[2].ID)
	}
	attached, err := resp.AttachJobs()
	if err != nil || len(attached) != 3 || attached[0].Job == nil || attached[0].Job.ID != job.ID {
		t.Fatalf("attach jobs: %v", err)
	}
	// Another node's fetch of these allocations gets none of them.
	if resp, _, err := s.NodeFetchAllocs(ctxT(t), other.ID, want, nil); err != nil || len(resp.Allocs) != 0 || len(resp.Jobs) != 0 {
		t.Fatalf("other node fetched %v (err %v)", resp, err)
	}
	// Bad input names the field.
	for _, bad := range [][]string{nil, {""}, make([]string, structs.MaxFetchAllocs+1)} {
		if _, _, err := s.NodeFetchAllocs(ctxT(t), node.ID, bad, nil); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "AllocIDs") {
			t.Fatalf("fetch %d IDs: err = %v, want ErrInvalid naming AllocIDs", len(bad), err)
		}
	}

	// The client's own report moves ModifyIndex only: a query from the
	// current index waits out its time.
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: allocs[0].ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, meta2, err := s.NodeClientAllocs(ctxT(t), node.ID, &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if meta2.Index != meta.Index || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("a client status report woke the query: index %d -> %d after %s", meta.Index, meta2.Index, time.Since(start))
	}

	// A stop is a server-side change: the query wakes and names it.
	done := make(chan map[string]uint64, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ids, _, _ := s.NodeClientAllocs(ctx, node.ID, &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: 15 * time.Second})
		done <- ids
	}()
	if _, err := s.JobDeregister(ctxT(t), job.ID, false); err != nil {
		t.Fatal(err)
	}
	select {
	case ids := <-done:
		moved := 0
		for _, a := range allocs {
			if ids[a.ID] > a.AllocModifyIndex {
				moved++
			}
		}
		if moved != 3 {
			t.Fatalf("after the stop %d of 3 allocations show a new AllocModifyIndex: %v", moved, ids)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stop did not wake the query")
	}
}

// TestNodeClientAllocsWait: the wait half of NodeClientAllocs is nil
// (answer at once) without an index or past it, and otherwise a wait on
// channels that a client's own status report leaves open and a stop of
// one of the node's allocations closes; its wait is the query's, with
// the jitter, and a bad wait option is capped like blockingQuery's.
func TestNodeClientAllocsWait(t *testing.T) {
	s := servertest.NewServer(t)
	node := registerNode(t, s, 4)
	job := statetest.BatchJob(1)
	job.TaskGroups[0].Count = 2
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	allocs := runningAllocs(t, s, job.ID, 2)
	_, meta, err := s.NodeClientAllocs(ctxT(t), node.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []*structs.QueryOptions{nil, {}, {MinQueryIndex: meta.Index - 1}} {
		if w, err := s.NodeClientAllocsWait(ctxT(t), node.ID, q); err != nil || w != nil {
			t.Fatalf("query %+v: wait %+v err %v, want an answer at once", q, w, err)
		}
	}
	w, err := s.NodeClientAllocsWait(ctxT(t), node.ID, &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: time.Hour})
	if err != nil || w == nil {
		t.Fatalf("wait %v err %v", w, err)
	}
	defer w.Release()
	if w.Wait < structs.MaxBlockingQueryWait || w.Wait > structs.MaxBlockingQueryWait+structs.MaxBlockingQueryWait/16 || len(w.Chans) < 3 || len(w.Chans) > 4 {
		t.Fatalf("wait %s (cap %s), %d channels", w.Wait, structs.MaxBlockingQueryWait, len(w.Chans))
	}
	closed := func() bool {
		for _, ch := range w.Chans {
			select {
			case <-ch:
				return true
			default:
			}
		}
		return false
	}
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: allocs[0].ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning}}); err != nil {
		t.Fatal(err)
	}
	if closed() {
		t.Fatal("the client's own status report closed a watch channel")
	}
	if _, err := s.JobDeregister(ctxT(t), job.ID, false); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 20*time.Second, "the stop closes a watch channel", closed)
	if w2, err := s.NodeClientAllocsWait(ctxT(t), node.ID, &structs.QueryOptions{MinQueryIndex: meta.Index}); err != nil || w2 != nil {
		t.Fatalf("after the stop: wait %+v err %v, want an answer at once", w2, err)
	}
}
