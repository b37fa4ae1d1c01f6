// Package fsm is GPUlayer's Raft finite state machine: it decodes each
// committed log entry (a structs.MessageType byte, then msgpack), calls the
// matching state store write, and snapshots and restores the whole store.
//
// The FSM is deterministic: every time and ID it stores comes in the
// message, never from a clock or a random source, so every server applying
// the same log reaches the same state (State().Hash() is equal).
package fsm

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Errors returned by Apply (as the response value) and DecodeMessage, besides
// those of the state store (which wrap structs.ErrNotFound or
// structs.ErrInvalid) and structs.ErrDecode for malformed msgpack.
var (
	// ErrEmptyMessage is returned for an empty log entry.
	ErrEmptyMessage = errors.New("fsm: empty message")
	// ErrUnknownMessageType is returned for a message type this FSM does
	// not know and that lacks structs.IgnoreUnknownTypeFlag.
	ErrUnknownMessageType = errors.New("fsm: unknown message type")
	// ErrApplyPanic is returned when a handler panicked on malformed input;
	// the state store's write transaction was rolled back.
	ErrApplyPanic = errors.New("fsm: handler panicked")
	// ErrHalted is returned (wrapped, naming the entry that caused it) by
	// Apply, Snapshot and Halted once the FSM has halted on an entry it
	// cannot apply: one that does not decode, or an unknown type without
	// structs.IgnoreUnknownTypeFlag.
	ErrHalted = errors.New("fsm: halted")
)

// Config configures an FSM.
type Config struct {
	// Logger is the parent logger; the FSM logs as its "fsm" sub-logger.
	// Nil means hclog.NewNullLogger().
	Logger hclog.Logger
	// OnCapacityFreed, when set, is called after an entry that freed or added
	// capacity has been applied, with the entry's Raft index: a client update
	// that made an allocation client-terminal, a node registered or marked
	// ready, a job purged. The server unblocks blocked evaluations with it.
	// It runs on Raft's apply goroutine: it must return quickly and must not
	// apply Raft entries itself.
	OnCapacityFreed func(index uint64)
	// OnHalt, when set, is called once when the FSM halts, with an error
	// wrapping ErrHalted that names the log index and the cause. It runs on
	// Raft's apply goroutine: it must return quickly (the server stops the
	// agent from another goroutine).
	OnHalt func(err error)
	// OnArtifactsDeleted, when set, is called after an ArtifactDelete
	// entry removed metadata, with the digests removed. It runs on Raft's
	// apply goroutine: it must return quickly (the server queues the blob
	// removals for another goroutine).
	OnArtifactsDeleted func(digests []string)
	// OnArtifactsUpserted, when set, is called after an ArtifactUpsert
	// entry was applied. It runs on Raft's apply goroutine: it must return
	// quickly (the server wakes its blob sync, which pulls blobs it lacks
	// from other servers, on another goroutine).
	OnArtifactsUpserted func()
}

// FSM applies Raft log entries to a state store. Its Raft methods (Apply,
// Snapshot, Restore) are reached only through RaftFSM.
type FSM struct {
	logger          hclog.Logger
	onCapacityFreed func(index uint64)
	state           atomic.Pointer[state.StateStore]
	onHalt          func(err error)
	// onArtifactsDeleted is Config.OnArtifactsDeleted.
	onArtifactsDeleted  func(digests []string)
	onArtifactsUpserted func()
	// halted holds the error that halted the FSM; nil while it runs.
	halted atomic.Pointer[error]
	// lastApplied is the Raft index of the last entry Apply finished.
	lastApplied atomic.Uint64
	// staleProvisionResults counts provider answers dropped as stale
	// (commands_provision.go).
	staleProvisionResults atomic.Uint64
}

// New returns an FSM over a new, empty state store. It returns an error
// only when the store cannot be created.
func New(cfg Config) (*FSM, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s, err := state.NewStateStore()
	if err != nil {
		return nil, fmt.Errorf("fsm: %w", err)
	}
	f := &FSM{logger: logger.Named("fsm"), onCapacityFreed: cfg.OnCapacityFreed, onHalt: cfg.OnHalt, onArtifactsDeleted: cfg.OnArtifactsDeleted,
		onArtifactsUpserted: cfg.OnArtifactsUpserted}
	f.state.Store(s)
	return f, nil
}

// State returns the current state store. A snapshot restore replaces it
// (and abandons the old one, closing its AbandonCh), so long-lived readers
// should call State again rather than keep the pointer.
func (f *FSM) State() *state.StateStore { return f.state.Load() }

// RaftFSM returns the raft.FSM to hand to raft.NewRaft.
func (f *FSM) RaftFSM() raft.FSM { return (*raftFSM)(f) }

// raftFSM carries the raft.FSM methods so they are not part of FSM's API
// (the hraftd store/store.go pattern).
type raftFSM FSM

var _ raft.FSM = (*raftFSM)(nil)

// Apply applies one committed entry and returns nil or an error value as
// the response, which raft.ApplyFuture.Response hands to the server:
//   - business errors from the state store, such as a wrapped
//     structs.ErrNotFound for a missing job or node, are returned as they
//     are;
//   - an empty entry, an unknown type without structs.IgnoreUnknownTypeFlag
//     or a malformed body halts the FSM, as Nomad's and Consul's do: a
//     server that skipped the entry would drift from its peers and serve a
//     state that lacks it. The error (wrapping ErrHalted and the cause) is
//     logged, returned, passed to Config.OnHalt, and returned for every
//     later entry, which is not applied; Snapshot fails from then on;
//   - an unknown type with the flag is logged as a warning and skipped
//     (nil).
//
// Apply never panics: a handler panic on malformed input is recovered into
// an error wrapping ErrApplyPanic (the same on every server, so no drift).
func (r *raftFSM) Apply(log *raft.Log) interface{} {
	f := (*FSM)(r)
	defer f.lastApplied.Store(log.Index)
	if err := f.Halted(); err != nil {
		return err
	}
	if log.Type != raft.LogCommand {
		return nil
	}
	t, req, err := DecodeMessage(log.Data)
	if err != nil {
		return f.halt(log.Index, t, err)
	}
	if req == nil {
		f.logger.Warn("skipping log entry of unknown type flagged ignorable", "index", log.Index, "type", uint8(t))
		return nil
	}
	return f.apply(t&^structs.IgnoreUnknownTypeFlag, log.Index, req)
}

// apply dispatches a decoded request to its handler.
func (f *FSM) apply(t structs.MessageType, index uint64, req interface{}) (resp interface{}) {
	fn, ok := commands[t]
	if !ok {
		// DecodeMessage only returns registered types.
		return fmt.Errorf("%w: %s", ErrUnknownMessageType, t)
	}
	defer func() {
		if r := recover(); r != nil {
			f.logger.Error("log entry handler panicked", "index", index, "type", t, "panic", r)
			resp = fmt.Errorf("%w: %s at index %d: %v", ErrApplyPanic, t, index, r)
		}
	}()
	return fn(f, index, req)
}

// LastApplied returns the Raft index of the last log entry Apply has
// finished (zero before the first). Raft's own applied index runs ahead of
// it: Raft counts an entry applied when it hands it to the FSM goroutine.
func (f *FSM) LastApplied() uint64 { return f.lastApplied.Load() }

// Halted returns nil while the FSM applies entries, and the error wrapping
// ErrHalted that stopped it otherwise.
func (f *FSM) Halted() error {
	if p := f.halted.Load(); p != nil {
		return *p
	}
	return nil
}

// halt stops the FSM on the entry at index and returns the halt error.
func (f *FSM) halt(index uint64, t structs.MessageType, cause error) error {
	err := fmt.Errorf("%w at raft index %d (message type %d): %w; the log is corrupt or was written by a newer version: "+
		"stop this server, wipe its data dir and let it rejoin (see README, \"Recovering a server\")", ErrHalted, index, uint8(t), cause)
	if f.halted.CompareAndSwap(nil, &err) {
		f.logger.Error("state machine halted: cannot apply log entry", "index", index, "type", uint8(t), "error", cause)
		if f.onHalt != nil {
			f.onHalt(err)
		}
	}
	return f.Halted()
}

// capacityFreed reports capacity changes to Config.OnCapacityFreed.
func (f *FSM) capacityFreed(index uint64) {
	if f.onCapacityFreed != nil {
		f.onCapacityFreed(index)
	}
}
