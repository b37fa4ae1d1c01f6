package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// buildArchive wraps an FSM snapshot stream in the operator archive format
// (server.ArchiveMagic ...), with a correct SHA-256 trailer.
func buildArchive(t *testing.T, meta raft.SnapshotMeta, st []byte) []byte {
	t.Helper()
	meta.Size = int64(len(st))
	mj, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(server.ArchiveMagic)
	b.WriteByte(server.ArchiveVersion)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(mj)))
	b.Write(mj)
	_ = binary.Write(&b, binary.BigEndian, uint64(len(st)))
	b.Write(st)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// fsmStream writes an FSM snapshot (server/fsm format) from records of
// (type, object), ending with the end record counting them.
func fsmStream(t *testing.T, records ...interface{}) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(fsm.SnapshotMagic)
	b.WriteByte(fsm.SnapshotFormatVersion)
	enc := codec.NewEncoder(&b, structs.MsgpackHandle)
	n := 0
	for i := 0; i+1 < len(records); i += 2 {
		b.WriteByte(byte(records[i].(fsm.SnapshotRecordType)))
		if err := enc.Encode(records[i+1]); err != nil {
			t.Fatal(err)
		}
		n++
	}
	b.WriteByte(byte(fsm.SnapshotRecordEnd))
	if err := enc.Encode(map[string]interface{}{"Records": uint64(n)}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func saveArchive(t *testing.T, s *server.Server) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.SnapshotSave(ctxT(t), &buf); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	return buf.Bytes()
}

func TestSnapshot_SaveRestoreRoundTrip(t *testing.T) {
	c := servertest.NewCluster(t, 3)
	kept := statetest.Job()
	kept.ID = "before-save"
	c.Register(kept)
	archive := saveArchive(t, c.Server(c.WaitForLeader()))
	if !bytes.HasPrefix(archive, []byte(server.ArchiveMagic)) {
		t.Fatalf("archive starts %q", archive[:8])
	}
	dropped := statetest.Job()
	dropped.ID = "after-save"
	c.Register(dropped)

	if err := c.Server(c.Follower()).SnapshotRestore(ctxT(t), bytes.NewReader(archive)); !errors.Is(err, structs.ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want ErrNotLeader", err)
	}
	if err := c.Server(c.WaitForLeader()).SnapshotRestore(ctxT(t), bytes.NewReader(archive)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	c.WaitForConvergence(convergeTimeout)
	for i, s := range c.Servers() {
		if !jobOn(t, s, kept.ID) || jobOn(t, s, dropped.ID) {
			t.Errorf("server %d after restore: has %s=%v %s=%v, want only the first", i, kept.ID, jobOn(t, s, kept.ID), dropped.ID, jobOn(t, s, dropped.ID))
		}
	}
	// The restored leader still schedules: its broker was rebuilt.
	c.Register(statetest.Job())
	c.WaitForConvergence(convergeTimeout)
}

// TestSnapshot_RestoreSkipsUnknownRecordType restores, through the server,
// an archive whose state holds a record type this version does not know
// (as a newer server might write): the record is skipped, everything else
// is restored on every server.
func TestSnapshot_RestoreSkipsUnknownRecordType(t *testing.T) {
	c := servertest.NewCluster(t, 3)
	job := statetest.Job()
	job.ID = "from-the-future"
	job.CreateIndex, job.ModifyIndex, job.JobModifyIndex = 3, 3, 3
	st := fsmStream(t,
		fsm.SnapshotRecordIndex, &state.IndexEntry{Key: state.TableJobs, Value: 3},
		fsm.SnapshotRecordType(77), map[string]interface{}{"Quota": "gpu-hours", "Limit": 42},
		fsm.SnapshotRecordJob, job,
	)
	archive := buildArchive(t, raft.SnapshotMeta{Version: 1, ID: "crafted", Index: 3, Term: 1}, st)
	if err := c.Server(c.WaitForLeader()).SnapshotRestore(ctxT(t), bytes.NewReader(archive)); err != nil {
		t.Fatalf("restore with an unknown record type: %v", err)
	}
	c.WaitForConvergence(convergeTimeout)
	for i, s := range c.Servers() {
		if !jobOn(t, s, job.ID) {
			t.Errorf("server %d lacks the restored job", i)
		}
	}
}

func TestSnapshot_RestoreRefusesBadArchives(t *testing.T) {
	s := servertest.NewServer(t)
	job := statetest.Job()
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	waitQuiet(t, s)
	good := saveArchive(t, s)
	garbageState := buildArchive(t, raft.SnapshotMeta{Version: 1, ID: "x", Index: 9, Term: 1}, []byte("GPULSNAP\x01not msgpack records"))
	truncatedState := fsmStream(t, fsm.SnapshotRecordJob, statetest.Job())
	truncatedState = truncatedState[:len(truncatedState)-3]

	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0xff
		return c
	}
	cases := []struct {
		name    string
		archive []byte
	}{
		{"empty", nil},
		{"not an archive", []byte("hello, this is not a snapshot archive at all, but long enough")},
		{"wrong version", flip(good, len(server.ArchiveMagic))},
		{"corrupt state byte", flip(good, len(good)-40)},
		{"corrupt checksum", flip(good, len(good)-1)},
		{"truncated", good[:len(good)-10]},
		{"padded", append(bytes.Clone(good), 0)},
		{"state not decodable", garbageState},
		{"state cut short", buildArchive(t, raft.SnapshotMeta{Version: 1, ID: "x", Index: 9, Term: 1}, truncatedState)},
	}
	before, _, err := stateHashOf(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SnapshotRestore(ctxT(t), bytes.NewReader(tc.archive))
			if !errors.Is(err, structs.ErrInvalid) || !errors.Is(err, server.ErrSnapshotArchive) {
				t.Fatalf("restore: %v, want ErrInvalid and ErrSnapshotArchive", err)
			}
			after, _, err := stateHashOf(s)
			if err != nil || after != before {
				t.Fatalf("state changed by a refused restore (%v)", err)
			}
		})
	}
	if !jobOn(t, s, job.ID) {
		t.Fatal("job lost")
	}
}

func stateHashOf(s *server.Server) (string, uint64, error) {
	h, err := s.State().Hash()
	if err != nil {
		return "", 0, err
	}
	i, err := s.State().LatestIndex()
	return h, i, err
}

// waitQuiet waits until s has no evaluation in flight and its Raft index
// stayed put over several polls, so a later state hash is stable.
func waitQuiet(t *testing.T, s *server.Server) {
	t.Helper()
	var last uint64
	still := 0
	waittest.NoErr(t, 10*time.Second, "the server to go quiet", func() (bool, error) {
		st := s.Stats()
		idx, err := s.State().LatestIndex()
		if err != nil {
			return false, err
		}
		if idx == last && st["broker.total_ready"] == "0" && st["broker.total_unacked"] == "0" && st["plan.queue_depth"] == "0" {
			still++
		} else {
			still = 0
		}
		last = idx
		return still >= 10, nil
	})
}
