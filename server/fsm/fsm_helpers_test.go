package fsm

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// testFSM returns an FSM whose OnCapacityFreed calls are recorded.
type testFSM struct {
	*FSM
	mu    sync.Mutex
	freed []uint64
}

func newTestFSM(t testing.TB) *testFSM {
	t.Helper()
	tf := &testFSM{}
	f, err := New(Config{
		Logger: hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: testWriter{t}, Level: hclog.Warn}),
		OnCapacityFreed: func(index uint64) {
			tf.mu.Lock()
			defer tf.mu.Unlock()
			tf.freed = append(tf.freed, index)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tf.FSM = f
	return tf
}

func (tf *testFSM) freedIndexes() []uint64 {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	return append([]uint64(nil), tf.freed...)
}

// applyMsg encodes msg as type t and applies it at index.
func (tf *testFSM) applyMsg(t testing.TB, index uint64, mt structs.MessageType, msg interface{}) interface{} {
	t.Helper()
	buf, err := structs.Encode(mt, msg)
	if err != nil {
		t.Fatal(err)
	}
	return tf.RaftFSM().Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
}

func (tf *testFSM) hash(t testing.TB) string {
	t.Helper()
	h, err := tf.State().Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }

// snapshotBytes persists f's current state and returns the bytes.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.RaftFSM().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.canceled {
		t.Fatalf("sink closed %v canceled %v", sink.closed, sink.canceled)
	}
	return sink.Bytes()
}

type readCloser struct {
	*bytes.Reader
	closed bool
}

func (r *readCloser) Close() error { r.closed = true; return nil }

func restoreBytes(f *FSM, b []byte) error {
	return f.RaftFSM().Restore(&readCloser{Reader: bytes.NewReader(b)})
}

// testWriter sends log lines to t.Log, shown only for failing tests.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
