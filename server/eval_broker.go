package server

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Eval broker errors.
var (
	// ErrNotOutstanding is returned by Ack, Nack and OutstandingReset for an
	// evaluation that is not currently dequeued.
	ErrNotOutstanding = errors.New("evaluation is not outstanding")
	// ErrTokenMismatch is returned by Ack, Nack and OutstandingReset when
	// the token is not the one handed out by the last Dequeue.
	ErrTokenMismatch = errors.New("evaluation token does not match")
	// ErrBrokerDisabled is returned by Dequeue while the broker is disabled
	// (this server is not the leader) and the caller asked not to wait.
	ErrBrokerDisabled = errors.New("eval broker disabled")
)

// Eval broker defaults, as in Nomad (nomad/config.go): the first Nack
// re-enqueues after 1 second, later ones after 20 seconds; an evaluation
// delivered 3 times without an Ack is failed; an evaluation not acked within
// 60 seconds of its Dequeue is nacked automatically.
const (
	DefaultEvalNackInitialDelay    = 1 * time.Second
	DefaultEvalNackSubsequentDelay = 20 * time.Second
	DefaultEvalDeliveryLimit       = 3
	DefaultEvalNackTimeout         = 60 * time.Second
)

// EvalBrokerConfig tunes an EvalBroker. Zero values take the defaults above.
type EvalBrokerConfig struct {
	NackTimeout         time.Duration
	InitialNackDelay    time.Duration
	SubsequentNackDelay time.Duration
	DeliveryLimit       int
}

// EvalBroker hands evaluations to scheduler workers with at-least-once
// delivery, modelled on Nomad's nomad/eval_broker.go. Ready evaluations are
// ordered by priority (higher first) then CreateIndex (older first). At most
// one evaluation per job is outstanding (ready, dequeued or waiting for a
// nack re-delivery); later evaluations for the same job wait and the next
// one becomes ready when the outstanding one is acked or failed.
//
// A dequeued evaluation must be acked (done) or nacked (retry) with the token
// Dequeue returned. It is nacked automatically after NackTimeout. After
// DeliveryLimit deliveries a nack moves it to the failed queue, which the
// leader drains with DequeueFailed to mark it failed through Raft.
//
// The broker does nothing while disabled: Enqueue drops evaluations (the
// leader restores them from the state store when it enables the broker) and
// Dequeue waits. All methods are safe for concurrent use.
type EvalBroker struct {
	cfg EvalBrokerConfig

	mu      sync.Mutex
	enabled bool
	// ready holds evaluations that may be dequeued now, by scheduler type.
	ready map[string]*evalHeap
	// unack holds dequeued evaluations by ID.
	unack map[string]*unackEval
	// jobEvals maps a job key to its one outstanding evaluation ID.
	jobEvals map[string]string
	// pending holds evaluations waiting for their job's outstanding one.
	pending map[string]*evalHeap
	// deliveries counts Dequeues per tracked evaluation ID; an ID present
	// here is tracked by the broker (ready, unacked, delayed or pending).
	deliveries map[string]int
	// delayed holds timers that re-enqueue nacked evaluations.
	delayed map[string]*time.Timer
	// waiting holds timers that enqueue evaluations whose WaitUntil has
	// not come; they do not count as their job's outstanding evaluation
	// meanwhile, so other evaluations of the job are not held up.
	waiting map[string]*time.Timer
	// requeue holds evaluations enqueued again while dequeued (a blocked
	// evaluation unblocked before its worker acked it); Ack makes them
	// ready again, Nack drops them (the nack re-delivers anyway).
	requeue map[string]*structs.Evaluation
	failed  []*structs.Evaluation
	// changed is closed and replaced whenever a waiter may make progress.
	changed chan struct{}
}

type unackEval struct {
	eval  *structs.Evaluation
	token string
	timer *time.Timer
}

// BrokerStats counts the broker's evaluations by state.
type BrokerStats struct {
	TotalReady   int
	TotalUnacked int
	// TotalPending counts evaluations waiting for an earlier evaluation of
	// the same job.
	TotalPending int
	// TotalWaiting counts evaluations held until their WaitUntil (the
	// broker's waiting timers; Nomad's "waiting").
	TotalWaiting int
	// TotalDelayed counts nacked evaluations held for their re-delivery
	// delay (the broker's delayed timers).
	TotalDelayed int
	TotalFailed  int
	ByType       map[string]int
}

// NewEvalBroker returns a disabled broker.
func NewEvalBroker(cfg EvalBrokerConfig) *EvalBroker {
	if cfg.NackTimeout <= 0 {
		cfg.NackTimeout = DefaultEvalNackTimeout
	}
	if cfg.InitialNackDelay < 0 {
		cfg.InitialNackDelay = 0
	} else if cfg.InitialNackDelay == 0 {
		cfg.InitialNackDelay = DefaultEvalNackInitialDelay
	}
	if cfg.SubsequentNackDelay <= 0 {
		cfg.SubsequentNackDelay = DefaultEvalNackSubsequentDelay
	}
	if cfg.DeliveryLimit <= 0 {
		cfg.DeliveryLimit = DefaultEvalDeliveryLimit
	}
	b := &EvalBroker{cfg: cfg, changed: make(chan struct{})}
	b.resetLocked()
	return b
}

func (b *EvalBroker) resetLocked() {
	for _, u := range b.unack {
		u.timer.Stop()
	}
	for _, t := range b.delayed {
		t.Stop()
	}
	for _, t := range b.waiting {
		t.Stop()
	}
	b.ready = map[string]*evalHeap{}
	b.unack = map[string]*unackEval{}
	b.jobEvals = map[string]string{}
	b.pending = map[string]*evalHeap{}
	b.deliveries = map[string]int{}
	b.delayed = map[string]*time.Timer{}
	b.waiting = map[string]*time.Timer{}
	b.requeue = map[string]*structs.Evaluation{}
	b.failed = nil
}

// notifyLocked wakes every waiter.
func (b *EvalBroker) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// SetEnabled enables or disables the broker. Disabling flushes every
// evaluation and stops every timer.
func (b *EvalBroker) SetEnabled(enabled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.enabled == enabled {
		return
	}
	b.enabled = enabled
	if !enabled {
		b.resetLocked()
	}
	b.notifyLocked()
}

// Enabled reports whether the broker is enabled.
func (b *EvalBroker) Enabled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enabled
}

func jobKey(namespace, jobID string) string { return namespace + "\x00" + jobID }

// Enqueue adds an evaluation. It is ignored while the broker is disabled,
// for a terminal evaluation, and for an evaluation the broker already
// tracks as ready, pending or waiting (so a retried enqueue is harmless).
// An evaluation enqueued while it is dequeued is delivered again after its
// Ack. An evaluation whose WaitUntil (Unix nanoseconds) is in the future is
// held until then, then enqueued as usual.
func (b *EvalBroker) Enqueue(eval *structs.Evaluation) {
	if eval == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled || eval.TerminalStatus() {
		return
	}
	if _, ok := b.deliveries[eval.ID]; ok {
		if _, out := b.unack[eval.ID]; out {
			b.requeue[eval.ID] = eval.Copy()
		}
		return
	}
	b.deliveries[eval.ID] = 0
	if wait := time.Until(time.Unix(0, eval.WaitUntil)); eval.WaitUntil > 0 && wait > 0 {
		b.waitLocked(eval.Copy(), wait)
		return
	}
	b.enqueueLocked(eval.Copy())
}

// waitLocked enqueues eval after wait, unless the broker is flushed
// (disabled) meanwhile.
func (b *EvalBroker) waitLocked(eval *structs.Evaluation, wait time.Duration) {
	id := eval.ID
	b.waiting[id] = time.AfterFunc(wait, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.waiting[id]; !ok {
			return // flushed meanwhile
		}
		delete(b.waiting, id)
		b.enqueueLocked(eval)
	})
}

// enqueueLocked makes eval ready, or pending when its job already has an
// outstanding evaluation.
func (b *EvalBroker) enqueueLocked(eval *structs.Evaluation) {
	key := jobKey(eval.Namespace, eval.JobID)
	if cur, ok := b.jobEvals[key]; ok && cur != eval.ID {
		h := b.pending[key]
		if h == nil {
			h = &evalHeap{}
			b.pending[key] = h
		}
		heap.Push(h, eval)
		return
	}
	b.jobEvals[key] = eval.ID
	b.pushReadyLocked(eval)
}

func (b *EvalBroker) pushReadyLocked(eval *structs.Evaluation) {
	h := b.ready[eval.Type]
	if h == nil {
		h = &evalHeap{}
		b.ready[eval.Type] = h
	}
	heap.Push(h, eval)
	b.notifyLocked()
}

// Dequeue waits for a ready evaluation of one of the scheduler types and
// returns a copy with its delivery token. It returns ctx's error when ctx
// ends first. The evaluation must then be acked or nacked with the token.
func (b *EvalBroker) Dequeue(ctx context.Context, types []string) (*structs.Evaluation, string, error) {
	for {
		b.mu.Lock()
		if b.enabled {
			if eval, token, ok := b.dequeueLocked(types); ok {
				b.mu.Unlock()
				return eval, token, nil
			}
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-ch:
		}
	}
}

// dequeueLocked pops the best ready evaluation across types.
func (b *EvalBroker) dequeueLocked(types []string) (*structs.Evaluation, string, bool) {
	var best *evalHeap
	for _, t := range types {
		h := b.ready[t]
		if h == nil || h.Len() == 0 {
			continue
		}
		if best == nil || evalLess((*h)[0], (*best)[0]) {
			best = h
		}
	}
	if best == nil {
		return nil, "", false
	}
	eval := heap.Pop(best).(*structs.Evaluation)
	token := structs.GenerateUUID()
	b.deliveries[eval.ID]++
	id := eval.ID
	timer := time.AfterFunc(b.cfg.NackTimeout, func() { _ = b.Nack(id, token) })
	b.unack[id] = &unackEval{eval: eval, token: token, timer: timer}
	return eval.Copy(), token, true
}

// checkTokenLocked returns the unacked entry for id when token matches.
func (b *EvalBroker) checkTokenLocked(id, token string) (*unackEval, error) {
	u, ok := b.unack[id]
	if !ok {
		return nil, fmt.Errorf("eval %s: %w", id, ErrNotOutstanding)
	}
	if u.token != token {
		return nil, fmt.Errorf("eval %s: %w", id, ErrTokenMismatch)
	}
	return u, nil
}

// Outstanding returns the token of a dequeued evaluation, and whether it is
// dequeued. The plan applier uses it to refuse plans from a worker whose
// evaluation was nacked meanwhile.
func (b *EvalBroker) Outstanding(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.unack[id]
	if !ok {
		return "", false
	}
	return u.token, true
}

// OutstandingReset restarts the nack timeout of a dequeued evaluation, for a
// worker whose scheduling takes long. It returns ErrNotOutstanding or
// ErrTokenMismatch (wrapped).
func (b *EvalBroker) OutstandingReset(id, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.checkTokenLocked(id, token)
	if err != nil {
		return err
	}
	u.timer.Reset(b.cfg.NackTimeout)
	return nil
}

// Ack marks a dequeued evaluation done and makes the next evaluation of the
// same job ready. It returns ErrNotOutstanding or ErrTokenMismatch
// (wrapped).
func (b *EvalBroker) Ack(id, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.checkTokenLocked(id, token)
	if err != nil {
		return err
	}
	u.timer.Stop()
	delete(b.unack, id)
	delete(b.deliveries, id)
	if again, ok := b.requeue[id]; ok {
		delete(b.requeue, id)
		b.deliveries[id] = 0
		b.enqueueLocked(again)
		return nil
	}
	b.releaseJobLocked(u.eval)
	return nil
}

// releaseJobLocked frees eval's job slot and promotes the job's next pending
// evaluation.
func (b *EvalBroker) releaseJobLocked(eval *structs.Evaluation) {
	key := jobKey(eval.Namespace, eval.JobID)
	if b.jobEvals[key] == eval.ID {
		delete(b.jobEvals, key)
	}
	h := b.pending[key]
	if h == nil || h.Len() == 0 {
		delete(b.pending, key)
		b.notifyLocked()
		return
	}
	next := heap.Pop(h).(*structs.Evaluation)
	if h.Len() == 0 {
		delete(b.pending, key)
	}
	b.jobEvals[key] = next.ID
	b.pushReadyLocked(next)
}

// Nack returns a dequeued evaluation for another delivery: after
// InitialNackDelay the first time and SubsequentNackDelay after that. Once
// the evaluation has been delivered DeliveryLimit times it goes to the
// failed queue instead. Nack returns ErrNotOutstanding or ErrTokenMismatch
// (wrapped).
func (b *EvalBroker) Nack(id, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.checkTokenLocked(id, token)
	if err != nil {
		return err
	}
	u.timer.Stop()
	delete(b.unack, id)
	delete(b.requeue, id)
	n := b.deliveries[id]
	if n >= b.cfg.DeliveryLimit {
		delete(b.deliveries, id)
		b.failed = append(b.failed, u.eval)
		b.releaseJobLocked(u.eval)
		return nil
	}
	delay := b.cfg.InitialNackDelay
	if n > 1 {
		delay = b.cfg.SubsequentNackDelay
	}
	eval := u.eval
	if delay == 0 {
		b.pushReadyLocked(eval)
		return nil
	}
	b.delayed[id] = time.AfterFunc(delay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.delayed[id]; !ok {
			return // flushed meanwhile
		}
		delete(b.delayed, id)
		b.pushReadyLocked(eval)
	})
	return nil
}

// DequeueFailed waits for an evaluation that exceeded its delivery limit and
// returns it; the caller records it as failed. It returns ctx's error when
// ctx ends first.
func (b *EvalBroker) DequeueFailed(ctx context.Context) (*structs.Evaluation, error) {
	for {
		b.mu.Lock()
		if b.enabled && len(b.failed) > 0 {
			eval := b.failed[0]
			b.failed = b.failed[1:]
			b.mu.Unlock()
			return eval.Copy(), nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// Stats returns the broker's counts.
func (b *EvalBroker) Stats() BrokerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := BrokerStats{
		TotalUnacked: len(b.unack),
		TotalWaiting: len(b.waiting),
		TotalDelayed: len(b.delayed),
		TotalFailed:  len(b.failed),
		ByType:       map[string]int{},
	}
	for t, h := range b.ready {
		st.TotalReady += h.Len()
		st.ByType[t] = h.Len()
	}
	for _, h := range b.pending {
		st.TotalPending += h.Len()
	}
	return st
}

// evalLess orders evaluations: higher priority first, then lower
// CreateIndex, then ID for determinism.
func evalLess(a, b *structs.Evaluation) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.CreateIndex != b.CreateIndex {
		return a.CreateIndex < b.CreateIndex
	}
	return a.ID < b.ID
}

// evalHeap is a container/heap of evaluations ordered by evalLess.
type evalHeap []*structs.Evaluation

func (h evalHeap) Len() int            { return len(h) }
func (h evalHeap) Less(i, j int) bool  { return evalLess(h[i], h[j]) }
func (h evalHeap) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *evalHeap) Push(x interface{}) { *h = append(*h, x.(*structs.Evaluation)) }
func (h *evalHeap) Pop() interface{} {
	old := *h
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return x
}
