package server

import (
	"context"
	"sort"
	"sync"

	"github.com/gpulayer/gpulayer/structs"
)

// BlockedEvals holds evaluations whose task groups did not fit, one per job,
// until capacity changes, after Nomad's nomad/blocked_evals.go (without its
// per-node-class tracking: any freed capacity unblocks every blocked
// evaluation, which is simple and never misses a placement).
//
// A newer blocked evaluation for a job replaces the older one; the older one
// is queued as a duplicate that the leader cancels through Raft (drained with
// Duplicates).
//
// Unblock is called from the FSM's OnCapacityFreed hook. It must not block
// the FSM, so it only records the index and wakes a goroutine that moves the
// blocked evaluations into the broker. An evaluation blocked on a snapshot
// older than the last unblock index missed that unblock and goes straight
// back to the broker.
//
// The tracker does nothing while disabled. All methods are safe for
// concurrent use.
type BlockedEvals struct {
	broker evalEnqueuer

	mu      sync.Mutex
	enabled bool
	// byJob maps a job key to its blocked evaluation.
	byJob map[string]*structs.Evaluation
	// lastUnblock is the highest Raft index at which capacity changed and
	// the tracker released its evaluations.
	lastUnblock uint64
	// wantUnblock is the highest index Unblock was called with, not yet
	// processed.
	wantUnblock uint64
	duplicates  []*structs.Evaluation
	unblockCh   chan struct{}
	dupCh       chan struct{}
	stopCh      chan struct{}
	doneCh      chan struct{}
	totalUnblk  uint64
}

// BlockedStats counts blocked evaluations.
type BlockedStats struct {
	TotalBlocked    int
	TotalDuplicates int
	// TotalUnblocked counts evaluations moved back to the broker since the
	// tracker was created.
	TotalUnblocked uint64
	// LastUnblockIndex is the Raft index of the last capacity change acted on.
	LastUnblockIndex uint64
}

// evalEnqueuer is what BlockedEvals needs of the eval broker: *EvalBroker,
// or in tests a recorder of the order evaluations are released in.
type evalEnqueuer interface {
	Enqueue(eval *structs.Evaluation)
}

// NewBlockedEvals returns a disabled tracker that re-enqueues into broker.
func NewBlockedEvals(broker *EvalBroker) *BlockedEvals {
	return newBlockedEvals(broker)
}

func newBlockedEvals(broker evalEnqueuer) *BlockedEvals {
	return &BlockedEvals{
		broker:    broker,
		byJob:     map[string]*structs.Evaluation{},
		unblockCh: make(chan struct{}, 1),
		dupCh:     make(chan struct{}, 1),
	}
}

// SetEnabled enables the tracker (starting its unblock goroutine) or
// disables it (stopping the goroutine and dropping every evaluation).
func (b *BlockedEvals) SetEnabled(enabled bool) {
	b.mu.Lock()
	if b.enabled == enabled {
		b.mu.Unlock()
		return
	}
	b.enabled = enabled
	if enabled {
		b.stopCh = make(chan struct{})
		b.doneCh = make(chan struct{})
		go b.run(b.stopCh, b.doneCh)
		b.mu.Unlock()
		return
	}
	b.byJob = map[string]*structs.Evaluation{}
	b.duplicates = nil
	b.wantUnblock = 0
	b.lastUnblock = 0
	stop, done := b.stopCh, b.doneCh
	b.mu.Unlock()
	close(stop)
	<-done
}

// Block tracks a blocked evaluation. It is ignored while disabled and for
// an evaluation whose Status is not blocked. An older blocked evaluation of
// the same job becomes a duplicate; a block for an evaluation older than the
// one tracked makes the new one the duplicate instead.
func (b *BlockedEvals) Block(eval *structs.Evaluation) {
	if eval == nil || eval.Status != structs.EvalStatusBlocked {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	eval = eval.Copy()
	// Capacity changed after the scheduler's snapshot: it may fit now.
	if eval.SnapshotIndex != 0 && b.lastUnblock > eval.SnapshotIndex {
		b.dropJobLocked(eval)
		b.totalUnblk++
		b.broker.Enqueue(eval)
		return
	}
	key := jobKey(eval.Namespace, eval.JobID)
	if old, ok := b.byJob[key]; ok && old.ID != eval.ID {
		if old.CreateIndex > eval.CreateIndex {
			b.addDuplicateLocked(eval)
			return
		}
		b.addDuplicateLocked(old)
	}
	b.byJob[key] = eval
}

// dropJobLocked removes any tracked evaluation of eval's job other than
// eval itself, as a duplicate.
func (b *BlockedEvals) dropJobLocked(eval *structs.Evaluation) {
	key := jobKey(eval.Namespace, eval.JobID)
	if old, ok := b.byJob[key]; ok {
		delete(b.byJob, key)
		if old.ID != eval.ID {
			b.addDuplicateLocked(old)
		}
	}
}

func (b *BlockedEvals) addDuplicateLocked(eval *structs.Evaluation) {
	b.duplicates = append(b.duplicates, eval)
	select {
	case b.dupCh <- struct{}{}:
	default:
	}
}

// Untrack forgets the blocked evaluation of a job, e.g. when the job is
// deregistered and a new evaluation supersedes it.
func (b *BlockedEvals) Untrack(namespace, jobID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byJob, jobKey(namespace, jobID))
}

// Unblock records that capacity changed at Raft index and, without
// blocking, wakes the goroutine that re-enqueues every blocked evaluation.
// It does nothing while the tracker is disabled.
func (b *BlockedEvals) Unblock(index uint64) {
	b.mu.Lock()
	if !b.enabled {
		b.mu.Unlock()
		return
	}
	if index > b.wantUnblock {
		b.wantUnblock = index
	}
	b.mu.Unlock()
	select {
	case b.unblockCh <- struct{}{}:
	default:
	}
}

func (b *BlockedEvals) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-b.unblockCh:
			b.unblockNow()
		}
	}
}

// unblockNow moves every blocked evaluation into the broker, highest
// priority first, then oldest (lowest CreateIndex) first: the order the
// broker dequeues them in, so queued work is placed by priority, then by
// when it was queued.
func (b *BlockedEvals) unblockNow() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled || b.wantUnblock == 0 {
		return
	}
	if b.wantUnblock > b.lastUnblock {
		b.lastUnblock = b.wantUnblock
	}
	b.wantUnblock = 0
	evals := make([]*structs.Evaluation, 0, len(b.byJob))
	for key, eval := range b.byJob {
		delete(b.byJob, key)
		evals = append(evals, eval)
	}
	sort.Slice(evals, func(i, j int) bool { return evalLess(evals[i], evals[j]) })
	for _, eval := range evals {
		b.totalUnblk++
		b.broker.Enqueue(eval)
	}
}

// Duplicates waits until superseded blocked evaluations exist and returns
// them all; the leader cancels them through Raft. It returns ctx's error
// when ctx ends first.
func (b *BlockedEvals) Duplicates(ctx context.Context) ([]*structs.Evaluation, error) {
	for {
		b.mu.Lock()
		if len(b.duplicates) > 0 {
			d := b.duplicates
			b.duplicates = nil
			b.mu.Unlock()
			return d, nil
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.dupCh:
		}
	}
}

// Stats returns the tracker's counts.
func (b *BlockedEvals) Stats() BlockedStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BlockedStats{
		TotalBlocked:     len(b.byJob),
		TotalDuplicates:  len(b.duplicates),
		TotalUnblocked:   b.totalUnblk,
		LastUnblockIndex: b.lastUnblock,
	}
}
