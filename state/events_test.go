package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// nextBatch reads one batch with a deadline so a missing event fails the
// test rather than hanging it.
func nextBatch(t *testing.T, sub *Subscription) *structs.EventBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("next after index %d: %v", sub.Index(), err)
	}
	return b
}

// writeHistory makes n writes of each kind at increasing indexes starting
// at 10, and returns the indexes written and the job.
func writeHistory(t *testing.T, s *StateStore, n int) ([]uint64, *structs.Job) {
	t.Helper()
	var idx []uint64
	index := uint64(10)
	job := statetest.BatchJob(1)
	node := statetest.Node(2)
	must(t, s.UpsertNode(index, node))
	idx = append(idx, index)
	for i := 0; i < n; i++ {
		index++
		j := job.Copy()
		j.Meta = map[string]string{"round": fmt.Sprint(i)}
		must(t, s.UpsertJob(index, j))
		idx = append(idx, index)
		index++
		ev := statetest.Eval(job)
		a := statetest.Alloc(job, node)
		must(t, s.UpsertPlanResults(index, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}, Evals: []*structs.Evaluation{ev}}))
		idx = append(idx, index)
	}
	return idx, job
}

func TestEventsResumeWithoutGapsOrDuplicates(t *testing.T) {
	s := testStore(t)
	idx, _ := writeHistory(t, s, 5)

	// Read everything from the start, then resume from each index in turn:
	// every resumed stream must be exactly the tail of the full one.
	var all []*structs.EventBatch
	sub := s.Events().Subscribe(1, nil)
	for range idx {
		all = append(all, nextBatch(t, sub))
	}
	for i, b := range all {
		if b.Index != idx[i] {
			t.Fatalf("batch %d has index %d, want %d", i, b.Index, idx[i])
		}
		for _, e := range b.Events {
			if e.Index != b.Index {
				t.Fatalf("event %s/%s index %d in batch %d", e.Topic, e.Key, e.Index, b.Index)
			}
		}
	}
	for cut := range all {
		resumed := s.Events().Subscribe(all[cut].Index, nil)
		for want := cut + 1; want < len(all); want++ {
			got := nextBatch(t, resumed)
			if got.Index != all[want].Index || len(got.Events) != len(all[want].Events) {
				t.Fatalf("resume from %d: got batch %d with %d events, want %d with %d",
					all[cut].Index, got.Index, len(got.Events), all[want].Index, len(all[want].Events))
			}
		}
	}

	// A live subscriber sees a later write exactly once.
	live := s.Events().Subscribe(0, nil)
	done := make(chan *structs.EventBatch, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b, err := live.Next(ctx)
		if err != nil {
			t.Errorf("live next: %v", err)
		}
		done <- b
	}()
	must(t, s.UpdateNodeStatus(100, all[0].Events[0].Key, structs.NodeStatusDown, 1))
	b := <-done
	if b == nil || b.Index != 100 || len(b.Events) != 1 || b.Events[0].Type != structs.EventNodeUpdated {
		t.Fatalf("live batch = %+v, want one NodeUpdated at 100", b)
	}
}

func TestEventsPayloadAndTypes(t *testing.T) {
	s := testStore(t)
	idx, job := writeHistory(t, s, 1)
	must(t, s.DeleteJob(50, job.ID))
	sub := s.Events().Subscribe(idx[0]-1, nil)
	var topics []string
	for range 4 {
		for _, e := range nextBatch(t, sub).Events {
			topics = append(topics, e.Topic+"/"+e.Type)
			if e.Topic == structs.TopicAllocation && e.Type == structs.EventAllocationUpdated {
				// The event holds the stored version itself, not a copy
				// (its job is left out when rendered: convert.EventBatchRead).
				if stored, _ := s.AllocByID(nil, e.Key); stored != nil && stored.ModifyIndex == e.Index && stored != e.Payload.Allocation {
					t.Errorf("allocation event holds a copy of the stored allocation")
				}
			}
			if e.Topic == structs.TopicNode && e.Payload.Node.SecretID != "" {
				t.Errorf("node event carries the node secret")
			}
		}
	}
	want := []string{
		"Node/NodeUpdated",
		"Job/JobRegistered",
		// plan results: the allocation, the evaluation, then the job's status.
		"Allocation/AllocationUpdated", "Evaluation/EvaluationUpdated", "Job/JobRegistered",
		"Job/JobDeregistered",
	}
	if fmt.Sprint(topics) != fmt.Sprint(want) {
		t.Fatalf("events:\n got %v\nwant %v", topics, want)
	}
}

func TestEventsTopicFilter(t *testing.T) {
	s := testStore(t)
	idx, job := writeHistory(t, s, 3)
	tests := []struct {
		name   string
		topics []string
		want   int // events over the whole history
	}{
		// Three registrations, and one status change (pending to
		// running) from the first plan; later plans leave the status.
		{"jobs", []string{"Job"}, 3 + 1},
		{"one job by key", []string{"Job:" + job.ID}, 4},
		{"other job", []string{"Job:nope", "Node"}, 1},
		{"allocs and evals", []string{"Allocation", "Evaluation"}, 6},
		{"allocs and evals of the job by filter key", []string{"Allocation:" + job.ID, "Evaluation:" + job.ID}, 6},
		{"all", []string{"*"}, 1 + 4 + 3*2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topics, err := structs.ParseEventTopics(tc.topics)
			must(t, err)
			sub := s.Events().Subscribe(1, topics)
			got := 0
			for sub.Index() < idx[len(idx)-1] {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				b, err := sub.Next(ctx)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					break // the rest of the history had nothing for this filter
				}
				must(t, err)
				for _, e := range b.Events {
					if !topics.Matches(e) {
						t.Fatalf("event %s/%s passed filter %v", e.Topic, e.Key, tc.topics)
					}
				}
				got += len(b.Events)
			}
			if got != tc.want {
				t.Fatalf("got %d events, want %d", got, tc.want)
			}
		})
	}
}

func TestParseEventTopicsBadInput(t *testing.T) {
	for _, in := range [][]string{{"Jobs"}, {"Job:"}, {""}, {"job"}} {
		if _, err := structs.ParseEventTopics(in); !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("ParseEventTopics(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestEventsTruncated(t *testing.T) {
	s := testStore(t)
	s.events = NewEventBuffer(4)
	idx, _ := writeHistory(t, s, 4) // 9 batches into a ring of 4
	// From the fifth-newest index on, everything is held.
	sub := s.Events().Subscribe(idx[len(idx)-5], nil)
	for i := len(idx) - 4; i < len(idx); i++ {
		if b := nextBatch(t, sub); b.Index != idx[i] {
			t.Fatalf("batch index %d, want %d", b.Index, idx[i])
		}
	}
	// One further back would skip a dropped batch: refused.
	old := s.Events().Subscribe(idx[len(idx)-6], nil)
	if _, err := old.Next(context.Background()); !errors.Is(err, ErrEventsTruncated) {
		t.Fatalf("next from a dropped index: %v, want ErrEventsTruncated", err)
	}

	// A restore past the buffer marks the skipped range missing too.
	fresh := testStore(t)
	fresh.AdoptEvents(s, 500)
	if _, err := fresh.Events().Subscribe(idx[len(idx)-1], nil).Next(context.Background()); !errors.Is(err, ErrEventsTruncated) {
		t.Fatalf("next across a restore: %v, want ErrEventsTruncated", err)
	}
	must(t, fresh.UpsertJob(501, statetest.Job()))
	if b := nextBatch(t, fresh.Events().Subscribe(500, nil)); b.Index != 501 {
		t.Fatalf("after restore: batch %d, want 501", b.Index)
	}
}

// TestWritesPublishEvents guards the event stream's completeness: every
// write transaction in the package must start with writeTxn (and end with
// commitTxn), or its changes would never reach subscribers.
func TestWritesPublishEvents(t *testing.T) {
	files, err := filepath.Glob("*.go")
	must(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "events.go" || f == "state_restore.go" {
			continue
		}
		src, err := os.ReadFile(f)
		must(t, err)
		if n := strings.Count(string(src), "db.Txn(true)"); n > 0 {
			t.Errorf("%s opens %d write transactions with db.Txn(true): use s.writeTxn() and s.commitTxn(txn, index) so they publish events", f, n)
		}
		if strings.Count(string(src), "s.writeTxn()") != strings.Count(string(src), "s.commitTxn(") {
			t.Errorf("%s: writeTxn and commitTxn calls do not pair up", f)
		}
	}
}

// TestEventBufferByteBound: the buffer holds no more than its byte bound
// of estimated event memory (dropping the oldest batches, which then read
// as truncated), always keeps the newest batch, and its count of held
// bytes returns to the sum of what it holds.
func TestEventBufferByteBound(t *testing.T) {
	alloc := func(i int) *structs.EventBatch {
		a := &structs.Allocation{ID: fmt.Sprintf("a-%05d", i), TaskStates: map[string]*structs.TaskState{"t": {State: "dead",
			Events: []*structs.TaskEvent{{Type: "Started"}, {Type: "Terminated", Details: map[string]string{"exit_code": "0"}}}}}}
		return &structs.EventBatch{Index: uint64(i), Events: []*structs.Event{{Topic: structs.TopicAllocation, Type: structs.EventAllocationUpdated,
			Key: a.ID, Index: uint64(i), Payload: structs.EventPayload{Allocation: a}}}}
	}
	one := batchBytes(alloc(1))
	if one < 500 {
		t.Fatalf("an allocation event is estimated at %d bytes: too small to bound anything", one)
	}
	b := NewEventBufferBytes(1000, 10*one)
	for i := 1; i <= 100; i++ {
		must(t, b.publish(alloc(i)))
		var sum int64
		for k := 0; k < b.n; k++ {
			sum += batchBytes(b.ring[(b.head+k)%len(b.ring)])
		}
		if b.bytes != sum || b.bytes > b.maxBytes {
			t.Fatalf("after %d batches: held %d bytes (counted %d), bound %d", i, sum, b.bytes, b.maxBytes)
		}
	}
	if b.n != 10 {
		t.Fatalf("holds %d batches of %d bytes under a bound of 10 of them", b.n, one)
	}
	if _, err := b.Subscribe(50, nil).Next(context.Background()); !errors.Is(err, ErrEventsTruncated) {
		t.Fatalf("next from a batch dropped for bytes: %v, want ErrEventsTruncated", err)
	}
	sub := b.Subscribe(90, nil)
	if got := nextBatch(t, sub); got.Index != 91 {
		t.Fatalf("first held batch %d, want 91", got.Index)
	}
	// A batch bigger than the whole bound replaces everything but is kept.
	big := &structs.EventBatch{Index: 101}
	for i := 0; i < 20; i++ {
		big.Events = append(big.Events, alloc(1000 + i).Events[0])
	}
	must(t, b.publish(big))
	if b.n != 1 || b.ring[b.head] != big {
		t.Fatalf("holds %d batches after one over the bound, want just it", b.n)
	}
}
