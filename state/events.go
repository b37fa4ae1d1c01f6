package state

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// DefaultEventBufferSize is how many Raft indexes' event batches an
// EventBuffer keeps when NewEventBuffer is given zero: 4096. A subscriber
// further behind than that gets ErrEventsTruncated and must re-read the
// state with a query before streaming again.
const DefaultEventBufferSize = 4096

// DefaultEventBufferBytes bounds the memory an EventBuffer holds as well
// (estimated by eventBytes, with what the events keep alive: an
// allocation's event keeps that version of it): 32 MiB. Batches are
// dropped, oldest first, until both bounds hold; the newest batch is
// always kept. At 100,000 allocations reported running and then complete,
// a count bound alone held every version of each (about half the
// server's heap).
const DefaultEventBufferBytes = 32 << 20

// ErrEventsTruncated is returned (wrapped, with the oldest index still
// held) when a subscription asks for events that the buffer no longer
// holds: they were dropped to keep it bounded, or the store was restored
// from a Raft snapshot past them. Streaming on would leave a gap.
var ErrEventsTruncated = errors.New("events no longer held")

// EventBuffer is a bounded, in-order ring of the event batches published by
// state store writes, one batch per Raft index. Subscribers read it by
// index, so a subscriber that resumes from the last index it saw gets every
// later event once: no gaps (or ErrEventsTruncated) and no duplicates. It
// is safe for concurrent use; the FSM is its only publisher.
//
// The design follows Nomad's nomad/stream event buffer and Consul's
// agent/consul/stream: events are produced from the memdb change set of
// each write transaction (memdb's TrackChanges), after it commits.
type EventBuffer struct {
	mu   sync.Mutex
	ring []*structs.EventBatch // ring[(head+i)%len(ring)], i < n, in Index order
	head int
	n    int
	// sizes[i] is ring[i]'s estimated size (batchBytes); bytes is their
	// sum over the batches held, bounded by maxBytes.
	sizes           []int64
	bytes, maxBytes int64
	// latest is the highest index published or restored.
	latest uint64
	// truncated is the highest index whose events may be missing: every
	// batch with Index > truncated that was ever published is in the ring.
	truncated uint64
	// notify is closed and replaced on every publish.
	notify chan struct{}
}

// NewEventBuffer returns an empty buffer that keeps the newest size
// batches, within DefaultEventBufferBytes; size zero or less means
// DefaultEventBufferSize.
func NewEventBuffer(size int) *EventBuffer {
	return NewEventBufferBytes(size, 0)
}

// NewEventBufferBytes is NewEventBuffer with a bound on the estimated bytes
// held (eventBytes); zero or less means DefaultEventBufferBytes.
func NewEventBufferBytes(size int, maxBytes int64) *EventBuffer {
	if size <= 0 {
		size = DefaultEventBufferSize
	}
	if maxBytes <= 0 {
		maxBytes = DefaultEventBufferBytes
	}
	return &EventBuffer{ring: make([]*structs.EventBatch, size), sizes: make([]int64, size), maxBytes: maxBytes, notify: make(chan struct{})}
}

// batchBytes estimates the memory a batch keeps alive.
func batchBytes(b *structs.EventBatch) int64 {
	n := int64(unsafe.Sizeof(*b)) + 8*int64(cap(b.Events))
	for _, e := range b.Events {
		n += eventBytes(e)
	}
	return n
}

// eventBytes estimates the memory one event keeps alive: the event, and
// the payload version it points at (a node's stub is its own; a job,
// evaluation or allocation is the stored version, kept alive by the event
// once the state has a newer one). The estimate counts struct sizes and
// the variable parts that grow (task states and their events, device
// IDs, strings of the key); it need not be exact, only proportional.
func eventBytes(e *structs.Event) int64 {
	if e == nil {
		return 0
	}
	n := int64(unsafe.Sizeof(*e)) + int64(len(e.Key))
	for _, k := range e.FilterKeys {
		n += 16 + int64(len(k))
	}
	p := e.Payload
	switch {
	case p.Allocation != nil:
		a := p.Allocation
		n += int64(unsafe.Sizeof(*a)) + 512 // IDs, names, resources
		if r := a.AllocatedResources; r != nil {
			for _, t := range r.Tasks {
				if t == nil {
					continue
				}
				n += int64(unsafe.Sizeof(*t))
				for _, d := range t.Devices {
					if d != nil {
						n += 64 + 48*int64(len(d.DeviceIDs))
					}
				}
			}
		}
		for _, ts := range a.TaskStates {
			if ts == nil {
				continue
			}
			n += int64(unsafe.Sizeof(*ts)) + 64
			for _, ev := range ts.Events {
				if ev != nil {
					n += int64(unsafe.Sizeof(*ev)) + 64*int64(len(ev.Details)) + int64(len(ev.Message)+len(ev.DisplayMessage))
				}
			}
		}
	case p.Job != nil:
		n += int64(unsafe.Sizeof(*p.Job)) + 2048*int64(len(p.Job.TaskGroups))
	case p.Node != nil:
		n += int64(unsafe.Sizeof(*p.Node)) + 512
	case p.Evaluation != nil:
		n += int64(unsafe.Sizeof(*p.Evaluation)) + 256
	case p.Service != nil:
		n += int64(unsafe.Sizeof(*p.Service)) + 256
	case p.Deployment != nil:
		n += int64(unsafe.Sizeof(*p.Deployment)) + 512*int64(len(p.Deployment.TaskGroups))
	}
	return n
}

// publish appends a batch. Batches must come in increasing Index order; an
// out-of-order batch is a programming error in the FSM and is dropped
// (reported by the returned error) so the ring stays sorted.
func (b *EventBuffer) publish(batch *structs.EventBatch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if batch.Index <= b.latest {
		return fmt.Errorf("state: event batch at index %d is not after the latest %d", batch.Index, b.latest)
	}
	size := batchBytes(batch)
	for b.n > 0 && (b.n == len(b.ring) || b.bytes+size > b.maxBytes) {
		dropped := b.ring[b.head]
		b.ring[b.head] = nil
		b.bytes -= b.sizes[b.head]
		b.head = (b.head + 1) % len(b.ring)
		b.n--
		b.truncated = dropped.Index
	}
	slot := (b.head + b.n) % len(b.ring)
	b.ring[slot], b.sizes[slot] = batch, size
	b.n++
	b.bytes += size
	b.latest = batch.Index
	close(b.notify)
	b.notify = make(chan struct{})
	return nil
}

// restoredAt records that the store was replaced by a snapshot taken at
// index: events up to index that were never published are missing, so a
// subscriber behind it gets ErrEventsTruncated.
func (b *EventBuffer) restoredAt(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if index > b.truncated {
		b.truncated = index
	}
	if index > b.latest {
		b.latest = index
	}
	close(b.notify)
	b.notify = make(chan struct{})
}

// LatestIndex returns the highest Raft index published or restored; a
// subscription from it sees only later changes.
func (b *EventBuffer) LatestIndex() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.latest
}

// next returns the first batch with Index > after, or nil and a channel
// closed at the next publish. It returns ErrEventsTruncated (wrapped) when
// batches after after may have been dropped.
func (b *EventBuffer) next(after uint64) (*structs.EventBatch, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if after < b.truncated {
		oldest := b.truncated
		if b.n > 0 {
			oldest = b.ring[b.head].Index
		}
		return nil, nil, fmt.Errorf("%w: index %d is older than the event buffer (it holds indexes from %d, after %d): re-read the state and stream from its index",
			ErrEventsTruncated, after, oldest, b.truncated)
	}
	i := sort.Search(b.n, func(i int) bool { return b.ring[(b.head+i)%len(b.ring)].Index > after })
	if i == b.n {
		return nil, b.notify, nil
	}
	return b.ring[(b.head+i)%len(b.ring)], nil, nil
}

// Subscription reads events in Raft index order. It is not safe for
// concurrent use; create one per reader.
type Subscription struct {
	buf    *EventBuffer
	topics structs.EventTopics
	cursor uint64
}

// Subscribe returns a subscription to events with Index > fromIndex that
// pass topics (nil means every topic). A fromIndex of zero means "from
// now": only changes after the buffer's latest index.
func (b *EventBuffer) Subscribe(fromIndex uint64, topics structs.EventTopics) *Subscription {
	if fromIndex == 0 {
		fromIndex = b.LatestIndex()
	}
	return &Subscription{buf: b, topics: topics, cursor: fromIndex}
}

// Index returns the Raft index of the last batch Next returned (or skipped
// because no event in it passed the filter): resuming from it continues the
// stream without gaps or duplicates.
func (s *Subscription) Index() uint64 { return s.cursor }

// Next blocks until a batch after the cursor has events that pass the
// filter and returns a batch holding just those events. It returns ctx's
// error when ctx ends first, and an error wrapping ErrEventsTruncated when
// the buffer has dropped events this subscription has not read yet.
func (s *Subscription) Next(ctx context.Context) (*structs.EventBatch, error) {
	for {
		batch, wait, err := s.buf.next(s.cursor)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-wait:
				continue
			}
		}
		s.cursor = batch.Index
		if len(s.topics) == 0 {
			return batch, nil
		}
		var evs []*structs.Event
		for _, e := range batch.Events {
			if s.topics.Matches(e) {
				evs = append(evs, e)
			}
		}
		if len(evs) > 0 {
			return &structs.EventBatch{Index: batch.Index, Events: evs}, nil
		}
	}
}

// Events returns the store's event buffer, which survives snapshot restores
// (see AdoptEvents).
func (s *StateStore) Events() *EventBuffer { return s.events }

// AdoptEvents makes s publish into old's event buffer, for a store that
// replaces old after a Raft snapshot restore at Raft index index; the
// buffer marks events up to index as missing.
func (s *StateStore) AdoptEvents(old *StateStore, index uint64) {
	s.events = old.events
	s.events.restoredAt(index)
}

// writeTxn starts a write transaction that records its changes for the
// event buffer. Every state write uses it and ends with commitTxn.
func (s *StateStore) writeTxn() *memdb.Txn {
	txn := s.db.Txn(true)
	txn.TrackChanges()
	return txn
}

// commitTxn commits txn and publishes its changes as the event batch of
// Raft index index. A write that changed nothing publishes nothing.
func (s *StateStore) commitTxn(txn *memdb.Txn, index uint64) {
	changes := txn.Changes()
	txn.Commit()
	if s.events == nil {
		return
	}
	batch := &structs.EventBatch{Index: index}
	for i := range changes {
		if e := eventFromChange(&changes[i], index); e != nil {
			batch.Events = append(batch.Events, e)
		}
	}
	if len(batch.Events) == 0 {
		return
	}
	// publish fails only for an index at or below the latest, which the
	// FSM never writes; such a batch is dropped rather than reordering the
	// stream.
	_ = s.events.publish(batch)
}

// eventFromChange turns one memdb change into an event, or nil for a table
// that has no topic (the index table).
func eventFromChange(c *memdb.Change, index uint64) *structs.Event {
	if c.Table == TableJobVersions {
		// The jobs table's change of the same write is the job's event.
		return nil
	}
	obj, deleted := c.After, false
	if obj == nil {
		obj, deleted = c.Before, true
	}
	switch o := obj.(type) {
	case *structs.Job:
		return &structs.Event{Topic: structs.TopicJob, Type: pick(deleted, structs.EventJobDeregistered, structs.EventJobRegistered),
			Key: o.ID, Index: index, Payload: structs.EventPayload{Job: o}}
	case *structs.Allocation:
		// The stored version itself, never mutated: a copy (one per
		// event, hundreds of bytes) held as much again as the allocations.
		// Its Job is not rendered in events (convert.EventBatchRead).
		return &structs.Event{Topic: structs.TopicAllocation, Type: pick(deleted, structs.EventAllocationDeleted, structs.EventAllocationUpdated),
			Key: o.ID, FilterKeys: []string{o.JobID, o.NodeID}, Index: index, Payload: structs.EventPayload{Allocation: o}}
	case *structs.Node:
		return &structs.Event{Topic: structs.TopicNode, Type: pick(deleted, structs.EventNodeDeleted, structs.EventNodeUpdated),
			Key: o.ID, Index: index, Payload: structs.EventPayload{Node: o.Stub()}}
	case *structs.Evaluation:
		return &structs.Event{Topic: structs.TopicEvaluation, Type: pick(deleted, structs.EventEvalDeleted, structs.EventEvalUpdated),
			Key: o.ID, FilterKeys: []string{o.JobID}, Index: index, Payload: structs.EventPayload{Evaluation: o}}
	// Service registrations: keyed by service name, as Nomad keys them.
	case *structs.ServiceRegistration:
		return &structs.Event{Topic: structs.TopicService, Type: pick(deleted, structs.EventServiceDeregistration, structs.EventServiceRegistration),
			Key: o.ServiceName, FilterKeys: []string{o.ID, o.JobID, o.AllocID}, Index: index, Payload: structs.EventPayload{Service: o}}
	case *structs.Deployment:
		return &structs.Event{Topic: structs.TopicDeployment, Type: pick(deleted, structs.EventDeploymentDeleted, structs.EventDeploymentStatusUpdate),
			Key: o.ID, FilterKeys: []string{o.JobID}, Index: index, Payload: structs.EventPayload{Deployment: o}}
	// Endpoint aliases: keyed by alias, filterable by the endpoint and
	// job it resolves to.
	case *structs.EndpointAlias:
		return &structs.Event{Topic: structs.TopicEndpointAlias, Type: pick(deleted, structs.EventEndpointAliasDemoted, structs.EventEndpointAliasPromoted),
			Key: o.Name, FilterKeys: []string{o.Endpoint, o.JobID}, Index: index, Payload: structs.EventPayload{EndpointAlias: o}}
	}
	return nil
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}
