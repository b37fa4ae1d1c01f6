package server

import (
	"context"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// ErrEventsTruncated is returned (wrapped) by EventSubscription.Next when
// the events after the subscription's index are no longer held: the reader
// fell more than state.DefaultEventBufferSize Raft indexes (or about
// state.DefaultEventBufferBytes of events) behind, or the server restored
// a snapshot past that index. The reader should re-read
// what it needs with a query and stream again from the query's index.
var ErrEventsTruncated = state.ErrEventsTruncated

// EventSubscription reads the state store's change events in Raft index
// order (see state.Subscription).
type EventSubscription interface {
	// Next blocks until a batch with matching events arrives and returns
	// it, or returns ctx's error, or an error wrapping ErrEventsTruncated.
	Next(ctx context.Context) (*structs.EventBatch, error)
	// Index is the Raft index of the last batch read; resuming from it
	// continues without gaps or duplicates.
	Index() uint64
}

// Events subscribes to the changes applied to this server's state store
// after Raft index fromIndex (zero means from now on) whose topic and key
// pass topics (nil means all). Every server, leader or not, publishes the
// events of the log entries it applies, so any server can serve the
// stream. The buffer survives snapshot restores.
func (s *Server) Events(fromIndex uint64, topics structs.EventTopics) EventSubscription {
	return s.State().Events().Subscribe(fromIndex, topics)
}

// EventIndex returns the Raft index of the newest event batch published
// (or the index of the last snapshot restore). A reader that takes it
// before reading the state and then streams from it sees every later
// change; it may see a change it already read, never miss one.
func (s *Server) EventIndex() uint64 { return s.State().Events().LatestIndex() }
