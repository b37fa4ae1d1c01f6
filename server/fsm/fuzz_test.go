package fsm

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

func addMessageSeeds(f *testing.F) {
	f.Helper()
	for mt, msg := range seedMessages() {
		buf, err := structs.Encode(mt, msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf)
	}
	f.Add([]byte{})
	f.Add([]byte{byte(structs.IgnoreUnknownTypeFlag | 99), 0xc0})
	f.Add([]byte{byte(structs.JobRegisterRequestType), 0x81, 0xa3, 'J', 'o', 'b', 0xc0})
}

// FuzzDecodeMessage checks that DecodeMessage never panics and that its
// results are consistent: a request comes back only without an error, and
// no request without an error only for an ignorable unknown type.
func FuzzDecodeMessage(f *testing.F) {
	addMessageSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		mt, req, err := DecodeMessage(data)
		switch {
		case err != nil && req != nil:
			t.Fatalf("both a request %T and an error %v", req, err)
		case err == nil && req == nil && mt&structs.IgnoreUnknownTypeFlag == 0:
			t.Fatalf("no request and no error for type %d", uint8(mt))
		case err == nil && req != nil:
			if _, ok := commands[mt&^structs.IgnoreUnknownTypeFlag]; !ok {
				t.Fatalf("request for unregistered type %d", uint8(mt))
			}
		}
	})
}

// FuzzApply applies one arbitrary entry to a fresh FSM holding a small
// cluster: it must never panic, must answer nil or an error, and must leave
// a store that still hashes and snapshots.
func FuzzApply(f *testing.F) {
	addMessageSeeds(f)
	base := snapshotBytes(f, populated(f).FSM)
	f.Fuzz(func(t *testing.T, data []byte) {
		tf := newTestFSM(t)
		if err := restoreBytes(tf.FSM, base); err != nil {
			t.Fatal(err)
		}
		resp := tf.RaftFSM().Apply(&raft.Log{Index: 1000, Type: raft.LogCommand, Data: data})
		if _, isErr := resp.(error); resp != nil && !isErr {
			t.Fatalf("response %T is neither nil nor an error", resp)
		}
		tf.hash(t)
		if tf.Halted() != nil {
			if _, err := tf.RaftFSM().Snapshot(); !errors.Is(err, ErrHalted) {
				t.Fatalf("snapshot of a halted FSM: %v, want ErrHalted", err)
			}
			return
		}
		snapshotBytes(t, tf.FSM)
	})
}

// FuzzRestore restores arbitrary bytes: it must never panic; a failure
// must leave the state as it was; a success must round-trip again.
func FuzzRestore(f *testing.F) {
	// Small seeds keep the fuzzer fast: one index row and one evaluation.
	small := newTestFSM(f)
	small.applyMsg(f, 1, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{{ID: "e1", JobID: "j", Status: "pending"}}})
	good := snapshotBytes(f, small.FSM)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(SnapshotMagic + "\x01"))
	f.Add([]byte(SnapshotMagic + "\x01\xff\x81\xa7Records\x00"))
	f.Add([]byte(SnapshotMagic + "\x01\x09\x92\x01\x02\xff\x81\xa7Records\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tf := newTestFSM(t)
		old := tf.State()
		before := tf.hash(t)
		if err := restoreBytes(tf.FSM, data); err != nil {
			if tf.State() != old || tf.hash(t) != before {
				t.Fatal("a failed restore changed the state")
			}
			if !errors.Is(err, ErrSnapshotFormat) && !errors.Is(err, structs.ErrDecode) && !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again := newTestFSM(t)
		if err := restoreBytes(again.FSM, snapshotBytes(t, tf.FSM)); err != nil {
			t.Fatalf("re-restore of a restored state: %v", err)
		}
		if again.hash(t) != tf.hash(t) {
			t.Fatal("restored state does not round-trip")
		}
	})
}
