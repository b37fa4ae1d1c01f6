package server

import (
	"sync"

	"github.com/gpulayer/gpulayer/structs"
)

// maxAllocUpdateBatch bounds the allocations one merged AllocClientUpdate
// entry carries (a Raft entry is sent whole to every follower); callers
// beyond it wait for the next entry.
const maxAllocUpdateBatch = 4096

// allocUpdateBatch merges the AllocClientUpdate requests that arrive while
// one is being applied into a single Raft entry (group commit). There is no
// timer: a lone request is applied at once, and under load each entry
// carries everything that arrived during the previous apply, so the number
// of entries grows with Raft's latency, not with the number of clients.
// The zero value is ready to use.
type allocUpdateBatch struct {
	mu      sync.Mutex
	queue   []*allocUpdateCall
	running bool
}

// allocUpdateCall is one caller's request and, once done is closed, the
// index and error of the entry that carried it.
type allocUpdateCall struct {
	req   *structs.AllocClientUpdateRequest
	done  chan struct{}
	index uint64
	err   error
}

// applyAllocUpdate applies req through the batch with apply (the Server's
// raftApply for AllocClientUpdateRequestType) and returns the Raft index of
// the entry that carried it. When a merged entry is refused by the FSM (a
// business error, not a Raft one), each request of it is applied alone, so
// one caller's bad update fails only that caller.
func (b *allocUpdateBatch) applyAllocUpdate(req *structs.AllocClientUpdateRequest, apply func(*structs.AllocClientUpdateRequest) (uint64, error)) (uint64, error) {
	c := &allocUpdateCall{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		go b.drain(apply)
	}
	b.mu.Unlock()
	<-c.done
	return c.index, c.err
}

// drain applies queued requests, each entry merging what is queued, until
// the queue is empty.
func (b *allocUpdateBatch) drain(apply func(*structs.AllocClientUpdateRequest) (uint64, error)) {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		n, allocs := 0, 0
		for n < len(b.queue) && (n == 0 || allocs+len(b.queue[n].req.Allocs) <= maxAllocUpdateBatch) {
			allocs += len(b.queue[n].req.Allocs)
			n++
		}
		calls := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()

		if len(calls) == 1 {
			calls[0].index, calls[0].err = apply(calls[0].req)
			close(calls[0].done)
			continue
		}
		index, err := apply(mergeAllocUpdates(calls))
		if err != nil && index != 0 {
			// The entry committed but the FSM refused it: find whose.
			for _, c := range calls {
				c.index, c.err = apply(c.req)
				close(c.done)
			}
			continue
		}
		for _, c := range calls {
			c.index, c.err = index, err
			close(c.done)
		}
	}
}

// mergeAllocUpdates joins the calls' requests in arrival order (a later
// update of the same allocation is applied after an earlier one), with the
// newest UpdatedAt.
func mergeAllocUpdates(calls []*allocUpdateCall) *structs.AllocClientUpdateRequest {
	m := &structs.AllocClientUpdateRequest{}
	for _, c := range calls {
		m.Allocs = append(m.Allocs, c.req.Allocs...)
		m.Evals = append(m.Evals, c.req.Evals...)
		m.UpdatedAt = max(m.UpdatedAt, c.req.UpdatedAt)
	}
	return m
}
