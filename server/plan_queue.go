package server

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// PlanQueue orders submitted plans for the leader's plan applier, which
// takes them one at a time: higher priority first, then oldest first (as
// Nomad's nomad/plan_queue.go). It accepts plans only while enabled (on the
// leader); disabling it answers every queued plan with ErrNotLeader. Safe
// for concurrent use.
type PlanQueue struct {
	mu      sync.Mutex
	enabled bool
	queue   planHeap
	seq     uint64
	changed chan struct{}
}

// pendingPlan is a plan waiting for the applier, with the eval token of the
// worker that submitted it.
type pendingPlan struct {
	plan      *structs.Plan
	evalToken string
	enqueued  time.Time
	seq       uint64
	resultCh  chan planAnswer
}

type planAnswer struct {
	result *structs.PlanResult
	err    error
}

// respond answers the submitter; it never blocks (the channel holds one).
func (p *pendingPlan) respond(result *structs.PlanResult, err error) {
	select {
	case p.resultCh <- planAnswer{result: result, err: err}:
	default:
	}
}

// PlanFuture is the answer to one submitted plan.
type PlanFuture struct{ p *pendingPlan }

// Wait returns the plan's result once the applier has handled it, or ctx's
// error when ctx ends first.
func (f *PlanFuture) Wait(ctx context.Context) (*structs.PlanResult, error) {
	select {
	case a := <-f.p.resultCh:
		return a.result, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NewPlanQueue returns a disabled plan queue.
func NewPlanQueue() *PlanQueue { return &PlanQueue{changed: make(chan struct{})} }

// SetEnabled enables or disables the queue. Disabling answers every queued
// plan with an error wrapping structs.ErrNotLeader.
func (q *PlanQueue) SetEnabled(enabled bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.enabled == enabled {
		return
	}
	q.enabled = enabled
	if !enabled {
		for _, p := range q.queue {
			p.respond(nil, fmt.Errorf("plan queue flushed: %w", structs.ErrNotLeader))
		}
		q.queue = nil
	}
	close(q.changed)
	q.changed = make(chan struct{})
}

// Enqueue submits a plan on behalf of the worker holding evalToken. It
// returns an error wrapping structs.ErrNotLeader while the queue is
// disabled.
func (q *PlanQueue) Enqueue(plan *structs.Plan, evalToken string) (*PlanFuture, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.enabled {
		return nil, fmt.Errorf("plan queue disabled: %w", structs.ErrNotLeader)
	}
	q.seq++
	p := &pendingPlan{plan: plan, evalToken: evalToken, enqueued: time.Now(), seq: q.seq, resultCh: make(chan planAnswer, 1)}
	heap.Push(&q.queue, p)
	close(q.changed)
	q.changed = make(chan struct{})
	return &PlanFuture{p: p}, nil
}

// Dequeue waits for the next plan, or returns ctx's error.
func (q *PlanQueue) Dequeue(ctx context.Context) (*pendingPlan, error) {
	for {
		q.mu.Lock()
		if q.enabled && q.queue.Len() > 0 {
			p := heap.Pop(&q.queue).(*pendingPlan)
			q.mu.Unlock()
			return p, nil
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// Depth returns the number of queued plans.
func (q *PlanQueue) Depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queue.Len()
}

type planHeap []*pendingPlan

func (h planHeap) Len() int { return len(h) }
func (h planHeap) Less(i, j int) bool {
	if h[i].plan.Priority != h[j].plan.Priority {
		return h[i].plan.Priority > h[j].plan.Priority
	}
	return h[i].seq < h[j].seq
}
func (h planHeap) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *planHeap) Push(x interface{}) { *h = append(*h, x.(*pendingPlan)) }
func (h *planHeap) Pop() interface{} {
	old := *h
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return x
}
