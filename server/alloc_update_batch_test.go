package server

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// fakeAllocApply records each entry it is given; the first one blocks until
// release is closed, so the calls made meanwhile pile up behind it. An
// allocation named "bad" makes the FSM refuse the entry (an error with an
// index, as raftApply returns an FSM response error).
type fakeAllocApply struct {
	release chan struct{}
	mu      sync.Mutex
	entries [][]string
	started chan struct{}
}

func (f *fakeAllocApply) apply(req *structs.AllocClientUpdateRequest) (uint64, error) {
	f.mu.Lock()
	first := len(f.entries) == 0
	var ids []string
	for _, a := range req.Allocs {
		ids = append(ids, a.ID)
	}
	f.entries = append(f.entries, ids)
	index := uint64(len(f.entries))
	f.mu.Unlock()
	if first {
		close(f.started)
		<-f.release
	}
	for _, a := range req.Allocs {
		if a.ID == "bad" {
			return index, fmt.Errorf("%w: bad update", structs.ErrInvalid)
		}
	}
	return index, nil
}

func (f *fakeAllocApply) entryCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries)
}

func oneUpdate(id string) *structs.AllocClientUpdateRequest {
	return &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{{ID: id, ClientStatus: structs.AllocClientStatusComplete}}, UpdatedAt: 1}
}

// TestAllocUpdateBatchMergesWhatArrivesDuringAnApply: a lone update is
// applied at once in its own entry; the updates that arrive while it is
// being applied share the next entry, each caller learning that entry's
// index; a merged entry the FSM refuses is split so only the bad update's
// caller gets the error.
func TestAllocUpdateBatchMergesWhatArrivesDuringAnApply(t *testing.T) {
	f := &fakeAllocApply{release: make(chan struct{}), started: make(chan struct{})}
	var b allocUpdateBatch
	type result struct {
		id    string
		index uint64
		err   error
	}
	results := make(chan result, 32)
	call := func(id string) {
		idx, err := b.applyAllocUpdate(oneUpdate(id), f.apply)
		results <- result{id, idx, err}
	}
	go call("first")
	<-f.started
	const waiting = 20
	for i := range waiting {
		go call(fmt.Sprintf("a%d", i))
	}
	go call("bad")
	// All of them are queued behind the first before it is released.
	waittest.Until(t, 5*time.Second, "calls queued", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == waiting+1
	})
	close(f.release)
	got := map[string]result{}
	for range waiting + 2 {
		r := <-results
		got[r.id] = r
	}
	if r := got["first"]; r.err != nil || r.index != 1 {
		t.Fatalf("first: index %d, err %v", r.index, r.err)
	}
	// Entry 2 is the merged one (refused for "bad"), then each call of
	// it alone: 2 + 22 entries, and every good call succeeded.
	if r := got["bad"]; !errors.Is(r.err, structs.ErrInvalid) {
		t.Fatalf("bad: err %v, want ErrInvalid", r.err)
	}
	for i := range waiting {
		if r := got[fmt.Sprintf("a%d", i)]; r.err != nil || r.index < 3 {
			t.Fatalf("a%d: index %d, err %v", i, r.index, r.err)
		}
	}
	if n := f.entryCount(); n != 2+waiting+1 {
		t.Fatalf("%d entries, want %d", n, 2+waiting+1)
	}
	f.mu.Lock()
	merged := len(f.entries[1])
	f.mu.Unlock()
	if merged != waiting+1 {
		t.Fatalf("merged entry carried %d allocations, want %d", merged, waiting+1)
	}

	// Without a bad one, the calls queued behind an apply share one entry.
	f2 := &fakeAllocApply{release: make(chan struct{}), started: make(chan struct{})}
	var b2 allocUpdateBatch
	go func() { _, _ = b2.applyAllocUpdate(oneUpdate("first"), f2.apply) }()
	<-f2.started
	var wg sync.WaitGroup
	indexes := make([]uint64, waiting)
	for i := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx, err := b2.applyAllocUpdate(oneUpdate(fmt.Sprintf("b%d", i)), f2.apply)
			if err != nil {
				t.Errorf("b%d: %v", i, err)
			}
			indexes[i] = idx
		}()
	}
	waittest.Until(t, 5*time.Second, "calls queued", func() bool {
		b2.mu.Lock()
		defer b2.mu.Unlock()
		return len(b2.queue) == waiting
	})
	close(f2.release)
	wg.Wait()
	for i, idx := range indexes {
		if idx != 2 {
			t.Fatalf("b%d applied at index %d, want 2 (one merged entry)", i, idx)
		}
	}
	if n := f2.entryCount(); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

// TestAllocUpdateBatchCapsAnEntry: queued updates beyond
// maxAllocUpdateBatch allocations go in a further entry.
func TestAllocUpdateBatchCapsAnEntry(t *testing.T) {
	big := func(id string, n int) *allocUpdateCall {
		req := &structs.AllocClientUpdateRequest{}
		for i := range n {
			req.Allocs = append(req.Allocs, &structs.Allocation{ID: fmt.Sprintf("%s-%d", id, i)})
		}
		return &allocUpdateCall{req: req, done: make(chan struct{})}
	}
	var b allocUpdateBatch
	b.queue = []*allocUpdateCall{big("x", maxAllocUpdateBatch-1), big("y", 2), big("z", 1)}
	b.running = true
	var sizes []int
	b.drain(func(req *structs.AllocClientUpdateRequest) (uint64, error) {
		sizes = append(sizes, len(req.Allocs))
		return uint64(len(sizes)), nil
	})
	if len(sizes) != 2 || sizes[0] != maxAllocUpdateBatch-1 || sizes[1] != 3 {
		t.Fatalf("entry sizes %v, want [%d 3]", sizes, maxAllocUpdateBatch-1)
	}
}
