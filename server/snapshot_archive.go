package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Snapshot archive format (`gpulayer operator snapshot save/restore`),
// modelled on Consul's snapshot archive (meta, state, SHA-256 sums) but as
// one flat stream:
//
//	"GPULBKUP" (8 bytes) | version (1 byte, ArchiveVersion)
//	| meta length (uint32, big-endian) | raft.SnapshotMeta as JSON
//	| state length (uint64, big-endian) | the FSM snapshot (server/fsm format)
//	| SHA-256 of every byte before it (32 bytes)
//
// A restore reads the whole archive to a temporary file, checks the lengths
// and the checksum, then decodes the state into a scratch FSM before it
// touches Raft, so a corrupt or truncated archive is refused and nothing
// changes.
const (
	ArchiveMagic   = "GPULBKUP"
	ArchiveVersion = uint8(1)
	// maxArchiveMetaBytes caps the meta section (a Raft configuration).
	maxArchiveMetaBytes = 1 << 20
	// snapshotRestoreTimeout bounds Raft's restore of an archive.
	snapshotRestoreTimeout = 5 * time.Minute
)

// ErrSnapshotArchive is wrapped (with structs.ErrInvalid) by the errors of
// SnapshotRestore for an archive that is not one, is truncated, fails its
// checksum or holds a state that does not decode.
var ErrSnapshotArchive = errors.New("bad snapshot archive")

// SnapshotSave takes a Raft snapshot of this server's state and streams it
// to w as a checksummed archive (format above). Any server can save its
// own state; the HTTP API runs it on the leader unless ?stale is given. It
// returns Raft's error when no snapshot can be taken, ctx's error, or w's.
func (s *Server) SnapshotSave(ctx context.Context, w io.Writer) error {
	if s.shutdownCtx.Err() != nil {
		return fmt.Errorf("snapshot save: %w", structs.ErrShutdown)
	}
	f := s.raft.Snapshot()
	if err := f.Error(); err != nil {
		return fmt.Errorf("snapshot save: %w", raftErr(err))
	}
	meta, rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("snapshot save: open: %w", err)
	}
	defer rc.Close()
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("snapshot save: meta: %w", err)
	}
	h := sha256.New()
	bw := bufio.NewWriter(w)
	out := io.MultiWriter(bw, h)
	var hdr bytes.Buffer
	hdr.WriteString(ArchiveMagic)
	hdr.WriteByte(ArchiveVersion)
	_ = binary.Write(&hdr, binary.BigEndian, uint32(len(metaJSON)))
	hdr.Write(metaJSON)
	_ = binary.Write(&hdr, binary.BigEndian, uint64(meta.Size))
	if _, err := out.Write(hdr.Bytes()); err != nil {
		return fmt.Errorf("snapshot save: write: %w", err)
	}
	if _, err := io.CopyN(out, ctxReader{ctx, rc}, meta.Size); err != nil {
		return fmt.Errorf("snapshot save: copy state: %w", err)
	}
	if _, err := bw.Write(h.Sum(nil)); err != nil {
		return fmt.Errorf("snapshot save: write: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot save: write: %w", err)
	}
	s.logger.Info("snapshot saved", "index", meta.Index, "term", meta.Term, "bytes", meta.Size)
	return nil
}

// SnapshotRestore replaces the cluster's state with an archive written by
// SnapshotSave. It must run on the leader, which restores the state through
// Raft (raft.Restore: the current Raft configuration is kept; followers
// receive the state by InstallSnapshot) and then rebuilds its eval broker,
// blocked evaluations and heartbeat timers from the restored state. It
// returns an error wrapping structs.ErrInvalid and ErrSnapshotArchive for a
// bad archive (nothing changes), structs.ErrNotLeader, structs.ErrShutdown,
// or the error of reading r.
func (s *Server) SnapshotRestore(ctx context.Context, r io.Reader) error {
	if err := s.checkLeader(); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	tmp, err := os.CreateTemp(s.config.DataDir, "restore-*.tmp")
	if err != nil {
		return fmt.Errorf("snapshot restore: spool: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if _, err := io.Copy(tmp, ctxReader{ctx, r}); err != nil {
		return fmt.Errorf("snapshot restore: read archive: %w", err)
	}
	meta, state, err := openArchive(tmp)
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	// Decode the state into a scratch FSM first: raft.Restore panics when
	// the FSM refuses a snapshot, so only a state that restores cleanly
	// may reach it.
	scratch, err := fsm.New(fsm.Config{Logger: hclog.NewNullLogger()})
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if err := scratch.RaftFSM().Restore(io.NopCloser(io.NewSectionReader(state, 0, state.Size()))); err != nil {
		return fmt.Errorf("snapshot restore: %w: %w: state does not decode: %v", structs.ErrInvalid, ErrSnapshotArchive, err)
	}
	if err := s.checkLeader(); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if err := s.raft.Restore(meta, io.NewSectionReader(state, 0, state.Size()), snapshotRestoreTimeout); err != nil {
		return fmt.Errorf("snapshot restore: %w", raftErr(err))
	}
	s.logger.Info("snapshot restored", "from_index", meta.Index, "bytes", meta.Size)
	if err := s.reloadLeaderState(); err != nil {
		return fmt.Errorf("snapshot restore: restored, but rebuilding leader state failed: %w", err)
	}
	return nil
}

// openArchive checks an archive spooled to f: magic, version, lengths and
// the SHA-256 trailer. It returns the Raft snapshot meta and the state
// section. Errors wrap structs.ErrInvalid and ErrSnapshotArchive.
func openArchive(f *os.File) (*raft.SnapshotMeta, *io.SectionReader, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %w: %s", structs.ErrInvalid, ErrSnapshotArchive, fmt.Sprintf(format, a...))
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := fi.Size()
	const fixed = int64(len(ArchiveMagic)) + 1 + 4 + 8 + sha256.Size
	if size < fixed {
		return nil, nil, bad("%d bytes is shorter than any archive (%d)", size, fixed)
	}
	hdr := make([]byte, len(ArchiveMagic)+1+4)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return nil, nil, bad("read header: %v", err)
	}
	if string(hdr[:len(ArchiveMagic)]) != ArchiveMagic {
		return nil, nil, bad("not a gpulayer snapshot archive (magic %q)", hdr[:len(ArchiveMagic)])
	}
	if v := hdr[len(ArchiveMagic)]; v != ArchiveVersion {
		return nil, nil, bad("archive version %d; this server reads %d", v, ArchiveVersion)
	}
	metaLen := int64(binary.BigEndian.Uint32(hdr[len(ArchiveMagic)+1:]))
	if metaLen > maxArchiveMetaBytes || int64(len(hdr))+metaLen+8+sha256.Size > size {
		return nil, nil, bad("meta length %d does not fit the %d-byte archive", metaLen, size)
	}
	metaJSON := make([]byte, metaLen+8)
	if _, err := f.ReadAt(metaJSON, int64(len(hdr))); err != nil {
		return nil, nil, bad("read meta: %v", err)
	}
	stateLen := binary.BigEndian.Uint64(metaJSON[metaLen:])
	stateOff := int64(len(hdr)) + metaLen + 8
	if stateLen > uint64(size) || stateOff+int64(stateLen)+sha256.Size != size {
		return nil, nil, bad("state length %d does not match the %d-byte archive (truncated or padded)", stateLen, size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size-sha256.Size)); err != nil {
		return nil, nil, bad("checksum: %v", err)
	}
	want := make([]byte, sha256.Size)
	if _, err := f.ReadAt(want, size-sha256.Size); err != nil {
		return nil, nil, bad("read checksum: %v", err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return nil, nil, bad("SHA-256 mismatch: the archive is corrupt")
	}
	var meta raft.SnapshotMeta
	if err := json.Unmarshal(metaJSON[:metaLen], &meta); err != nil {
		return nil, nil, bad("meta: %v", err)
	}
	meta.Size = int64(stateLen)
	return &meta, io.NewSectionReader(f, stateOff, int64(stateLen)), nil
}

// reloadLeaderState rebuilds the leader's in-memory work from the state
// store after a restore replaced it: the broker and blocked tracker are
// flushed and refilled, and every node gets the failover TTL.
func (s *Server) reloadLeaderState() error {
	if !s.established.Load() {
		return nil // a leader still establishing reads the new state itself
	}
	s.broker.SetEnabled(false)
	s.blocked.SetEnabled(false)
	s.heartbeats.clear()
	s.broker.SetEnabled(true)
	s.blocked.SetEnabled(true)
	if err := s.restoreEvals(); err != nil {
		return err
	}
	return s.initializeHeartbeatTimers()
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
