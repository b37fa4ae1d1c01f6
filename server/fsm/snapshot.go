package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Snapshot format: the 8-byte magic SnapshotMagic, one byte
// SnapshotFormatVersion, then records. A record is one record-type byte
// followed by the msgpack of its object. The last record is
// SnapshotRecordEnd, whose object is a snapshotTrailer counting the records
// before it, so a snapshot cut short is refused rather than half-restored.
//
// Format 2 writes each allocation as SnapshotRecordAllocRef, its job
// version once in a SnapshotRecordAllocJob record before the first
// allocation naming it, instead of one whole job inside every allocation
// (format 1, SnapshotRecordAlloc): 200,000 allocations of 2,000 jobs took
// 26 s and 346 MiB to persist in format 1. Restore reads formats 1 and 2;
// a server that reads only format 1 refuses a format 2 snapshot (version
// mismatch) rather than skipping its allocations.
const (
	SnapshotMagic         = "GPULSNAP"
	SnapshotFormatVersion = uint8(2)
	// snapshotFormatOldest is the oldest format Restore still reads.
	snapshotFormatOldest = uint8(1)
)

// SnapshotRecordType is the first byte of each snapshot record. Values are
// append-only. A reader skips record types it does not know.
type SnapshotRecordType uint8

// Snapshot record types.
const (
	SnapshotRecordJob   SnapshotRecordType = 1 // a *structs.Job
	SnapshotRecordNode  SnapshotRecordType = 2 // a *structs.Node
	SnapshotRecordAlloc SnapshotRecordType = 3 // a *structs.Allocation
	SnapshotRecordEval  SnapshotRecordType = 4 // a *structs.Evaluation
	SnapshotRecordIndex SnapshotRecordType = 5 // a *state.IndexEntry
	// ACL records (policies, tokens with their secrets, the bootstrap).
	SnapshotRecordACLPolicy    SnapshotRecordType = 6 // a *structs.ACLPolicy
	SnapshotRecordACLToken     SnapshotRecordType = 7 // a *structs.ACLToken
	SnapshotRecordACLBootstrap SnapshotRecordType = 8 // a *structs.ACLBootstrap
	SnapshotRecordArtifact     SnapshotRecordType = 9 // a *structs.Artifact (metadata only)
	// Service registrations.
	SnapshotRecordServiceRegistration SnapshotRecordType = 28 // a *structs.ServiceRegistration (numbered as its Raft type, so parallel features do not collide)
	// Job versions and deployments (numbered as their Raft message types,
	// so branches adding records do not collide).
	SnapshotRecordJobVersion SnapshotRecordType = 22 // a *structs.Job in the job versions table
	SnapshotRecordDeployment SnapshotRecordType = 23 // a *structs.Deployment
	// Periodic jobs.
	SnapshotRecordPeriodicLaunch SnapshotRecordType = 10 // a *structs.PeriodicLaunch
	// Allocations without their job (format 2).
	SnapshotRecordAllocJob SnapshotRecordType = 11 // a snapshotAllocJob: a job version allocations name
	SnapshotRecordAllocRef SnapshotRecordType = 12 // a snapshotAllocRef: an allocation and its job's Ref
	// Endpoint aliases.
	SnapshotRecordEndpointAlias SnapshotRecordType = 13 // a *structs.EndpointAlias
	// Node pools.
	SnapshotRecordNodePool SnapshotRecordType = 14 // a *structs.NodePool (written pools only)
	// Provisioning.
	SnapshotRecordProvisionRequest SnapshotRecordType = 15 // a *structs.ProvisionRequest
	// SnapshotRecordEnd ends the stream; its object is a snapshotTrailer.
	SnapshotRecordEnd SnapshotRecordType = 255
)

// Errors returned by Restore, which leaves the current state untouched.
var (
	// ErrSnapshotFormat is returned for a wrong magic, another format
	// version, or a snapshot without its end record (truncated).
	ErrSnapshotFormat = errors.New("fsm: bad snapshot")
)

// snapshotTrailer is the object of SnapshotRecordEnd.
type snapshotTrailer struct {
	// Records counts the records written before the end record.
	Records uint64
}

// snapshotAllocJob is the object of SnapshotRecordAllocJob: the job
// version (Allocation.Job) of the allocations whose snapshotAllocRef names
// Ref. Refs count from 1 in the order the records are written.
type snapshotAllocJob struct {
	Ref uint64
	Job *structs.Job
}

// snapshotAllocRef is the object of SnapshotRecordAllocRef: an allocation
// written without its Job, and JobRef, the Ref of the SnapshotRecordAllocJob
// record written before it that holds that job (0: the allocation has no
// job).
type snapshotAllocRef struct {
	JobRef uint64
	Alloc  *structs.Allocation
}

// allocJobKey identifies a job version by content: a stored job is
// replaced, never changed, and every write gives it a new ModifyIndex.
type allocJobKey struct {
	namespace, id                     string
	modifyIndex, jobModifyIndex, vers uint64
}

// fsmSnapshot is a point-in-time state snapshot waiting to be persisted.
type fsmSnapshot struct {
	snap   *state.StateSnapshot
	logger hclog.Logger
}

// Snapshot captures the current state. It is cheap (a memdb snapshot);
// Persist does the writing, concurrently with further Apply calls.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	f := (*FSM)(r)
	if err := f.Halted(); err != nil {
		// The state lacks the entry that halted it and everything after:
		// a snapshot of it would pass the gap on.
		return nil, fmt.Errorf("fsm: snapshot: %w", err)
	}
	snap, err := f.State().Snapshot()
	if err != nil {
		return nil, fmt.Errorf("fsm: snapshot: %w", err)
	}
	return &fsmSnapshot{snap: snap, logger: f.logger}, nil
}

// Persist writes the snapshot to sink and closes it, or cancels the sink
// and returns the error.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		s.logger.Error("failed to persist snapshot", "error", err)
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release is a no-op: the memdb snapshot is garbage-collected.
func (s *fsmSnapshot) Release() {}

func (s *fsmSnapshot) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	sw := &snapshotWriter{w: bw}
	if _, err := bw.WriteString(SnapshotMagic); err != nil {
		return err
	}
	if err := bw.WriteByte(SnapshotFormatVersion); err != nil {
		return err
	}
	if err := writeState(sw, s.snap); err != nil {
		return err
	}
	if err := sw.record(SnapshotRecordEnd, &snapshotTrailer{Records: sw.n}); err != nil {
		return err
	}
	return bw.Flush()
}

// writeState writes every table of snap as records.
func writeState(sw *snapshotWriter, snap *state.StateSnapshot) error {
	for _, table := range []string{state.TableJobs, state.TableNodes, state.TableAllocs, state.TableEvals,
		state.TableACLPolicies, state.TableACLTokens, state.TableACLBootstrap, state.TableArtifacts,
		state.TableServiceRegistrations, state.TablePeriodicLaunch,
		// Job versions and deployments.
		state.TableJobVersions, state.TableDeployments,
		// Endpoint aliases.
		state.TableEndpointAliases,
		// Node pools.
		state.TableNodePools,
		// Provisioning.
		state.TableProvisionRequests} {
		idx, err := snap.Index(table)
		if err != nil {
			return err
		}
		if idx == 0 {
			continue // never written: no row to restore
		}
		if err := sw.record(SnapshotRecordIndex, &state.IndexEntry{Key: table, Value: idx}); err != nil {
			return err
		}
	}
	jobs, err := snap.Jobs(nil)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := sw.record(SnapshotRecordJob, j); err != nil {
			return err
		}
	}
	nodes, err := snap.Nodes(nil)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := sw.record(SnapshotRecordNode, n); err != nil {
			return err
		}
	}
	allocs, err := snap.Allocs(nil)
	if err != nil {
		return err
	}
	if err := writeAllocs(sw, allocs); err != nil {
		return err
	}
	evals, err := snap.Evals(nil)
	if err != nil {
		return err
	}
	for _, e := range evals {
		if err := sw.record(SnapshotRecordEval, e); err != nil {
			return err
		}
	}
	if err := writeACLState(sw, snap); err != nil {
		return err
	}
	arts, err := snap.Artifacts(nil)
	if err != nil {
		return err
	}
	for _, a := range arts {
		if err := sw.record(SnapshotRecordArtifact, a); err != nil {
			return err
		}
	}
	regs, err := snap.ServiceRegistrations(nil)
	if err != nil {
		return err
	}
	for _, reg := range regs {
		if err := sw.record(SnapshotRecordServiceRegistration, reg); err != nil {
			return err
		}
	}
	launches, err := snap.PeriodicLaunches(nil)
	if err != nil {
		return err
	}
	for _, l := range launches {
		if err := sw.record(SnapshotRecordPeriodicLaunch, l); err != nil {
			return err
		}
	}
	if err := writeDeploymentState(sw, snap); err != nil {
		return err
	}
	if err := writeEndpointAliases(sw, snap); err != nil {
		return err
	}
	// Node pools.
	if err := writeNodePools(sw, snap); err != nil {
		return err
	}
	return writeProvisionState(sw, snap)
}

// writeAllocs writes allocs as SnapshotRecordAllocRef records, each distinct
// job version once, as a SnapshotRecordAllocJob before the first
// allocation that names it. The refs follow the allocations' order and
// the jobs' content, so equal states give identical bytes. Chunks of
// allocations are encoded in parallel (encoding is most of a snapshot's
// time) and written in order; at most twice GOMAXPROCS chunks are held.
func writeAllocs(sw *snapshotWriter, allocs []*structs.Allocation) error {
	items := make([]allocItem, len(allocs))
	refs := map[allocJobKey]uint64{}
	for i, a := range allocs {
		items[i].alloc = a
		if j := a.Job; j != nil {
			key := allocJobKey{j.Namespace, j.ID, j.ModifyIndex, j.JobModifyIndex, j.Version}
			ref := refs[key]
			if ref == 0 {
				ref = uint64(len(refs) + 1)
				refs[key] = ref
				items[i].newJob = true
			}
			items[i].ref = ref
		}
	}
	const chunk = 2048
	n := (len(items) + chunk - 1) / chunk
	if n == 0 {
		return nil
	}
	sem := make(chan struct{}, 2*runtime.GOMAXPROCS(0))
	stop := make(chan struct{})
	defer close(stop)
	results := make([]chan *encodedChunk, n)
	for i := range results {
		results[i] = make(chan *encodedChunk, 1)
	}
	go func() {
		for i := 0; i < n; i++ {
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			}
			go func(i int) {
				results[i] <- encodeAllocChunk(items[i*chunk : min((i+1)*chunk, len(items))])
			}(i)
		}
	}()
	for i := 0; i < n; i++ {
		c := <-results[i]
		<-sem
		if c.err != nil {
			return c.err
		}
		if _, err := sw.w.Write(c.buf.Bytes()); err != nil {
			return err
		}
		sw.n += c.records
	}
	return nil
}

// allocItem is one allocation to write: its job's Ref, and whether its
// job record comes first.
type allocItem struct {
	alloc  *structs.Allocation
	ref    uint64
	newJob bool
}

// encodedChunk is the records of a run of allocations, encoded.
type encodedChunk struct {
	buf     bytes.Buffer
	records uint64
	err     error
}

// encodeAllocChunk encodes items as records (see writeAllocs).
func encodeAllocChunk(items []allocItem) *encodedChunk {
	c := &encodedChunk{}
	enc := codec.NewEncoder(&c.buf, snapshotHandle)
	put := func(t SnapshotRecordType, obj interface{}) bool {
		c.buf.WriteByte(byte(t))
		if err := enc.Encode(obj); err != nil {
			c.err = fmt.Errorf("fsm: snapshot: encode record %d: %w", t, err)
			return false
		}
		c.records++
		return true
	}
	for _, it := range items {
		if it.newJob && !put(SnapshotRecordAllocJob, &snapshotAllocJob{Ref: it.ref, Job: it.alloc.Job}) {
			return c
		}
		slim := *it.alloc
		slim.Job = nil
		if !put(SnapshotRecordAllocRef, &snapshotAllocRef{JobRef: it.ref, Alloc: &slim}) {
			return c
		}
	}
	return c
}

// writeACLState writes the ACL tables as records.
func writeACLState(sw *snapshotWriter, snap *state.StateSnapshot) error {
	policies, err := snap.ACLPolicies(nil)
	if err != nil {
		return err
	}
	for _, p := range policies {
		if err := sw.record(SnapshotRecordACLPolicy, p); err != nil {
			return err
		}
	}
	tokens, err := snap.ACLTokens(nil)
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if err := sw.record(SnapshotRecordACLToken, t); err != nil {
			return err
		}
	}
	b, err := snap.ACLBootstrapped(nil)
	if err != nil {
		return err
	}
	if b != nil {
		return sw.record(SnapshotRecordACLBootstrap, b)
	}
	return nil
}

// snapshotHandle is structs.MsgpackHandle's settings with canonical map
// order, so equal states give byte-identical snapshots.
var snapshotHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = structs.MsgpackHandle.RawToString
	h.WriteExt = structs.MsgpackHandle.WriteExt
	h.MapType = structs.MsgpackHandle.MapType
	h.Canonical = true
	return h
}()

// snapshotWriter writes records and counts them. One encoder serves every
// record (a new encoder per record cost more than the encoding).
type snapshotWriter struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *codec.Encoder
	n   uint64
}

func (sw *snapshotWriter) record(t SnapshotRecordType, obj interface{}) error {
	sw.buf.Reset()
	if sw.enc == nil {
		sw.enc = codec.NewEncoder(&sw.buf, snapshotHandle)
	} else {
		sw.enc.Reset(&sw.buf)
	}
	if err := sw.enc.Encode(obj); err != nil {
		return fmt.Errorf("fsm: snapshot: encode record %d: %w", t, err)
	}
	if err := sw.w.WriteByte(byte(t)); err != nil {
		return err
	}
	if _, err := sw.w.Write(sw.buf.Bytes()); err != nil {
		return err
	}
	if t != SnapshotRecordEnd {
		sw.n++
	}
	return nil
}

// Restore replaces the state with the snapshot read from rc, which it
// closes. It reads into a new store and swaps it in only when the whole
// snapshot was read: on any error (ErrSnapshotFormat for a wrong magic,
// another format version or a truncated stream; structs.ErrDecode for a
// malformed record; structs.ErrInvalid for an object without ID) the
// current state is untouched. Unknown record types are skipped with a
// warning. The old store is abandoned (its AbandonCh closed) after the
// swap.
func (r *raftFSM) Restore(rc io.ReadCloser) error {
	f := (*FSM)(r)
	defer rc.Close()
	newState, err := readSnapshot(bufio.NewReader(rc), f.logger)
	if err != nil {
		f.logger.Error("failed to restore snapshot; keeping the current state", "error", err)
		return err
	}
	// The event buffer outlives the store; events the snapshot skipped
	// over are marked missing so no subscriber streams across the gap.
	restoredIndex, err := newState.LatestIndex()
	if err != nil {
		return err
	}
	newState.AdoptEvents(f.State(), restoredIndex)
	old := f.state.Swap(newState)
	old.Abandon()
	f.logger.Info("restored state from snapshot")
	return nil
}

// readSnapshot reads a whole snapshot into a new store.
func readSnapshot(br *bufio.Reader, logger hclog.Logger) (*state.StateStore, error) {
	header := make([]byte, len(SnapshotMagic)+1)
	if _, err := io.ReadFull(br, header); err != nil {
		return nil, fmt.Errorf("%w: read header: %v", ErrSnapshotFormat, err)
	}
	if string(header[:len(SnapshotMagic)]) != SnapshotMagic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrSnapshotFormat, header[:len(SnapshotMagic)], SnapshotMagic)
	}
	if v := header[len(SnapshotMagic)]; v < snapshotFormatOldest || v > SnapshotFormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this server reads %d to %d", ErrSnapshotFormat, v, snapshotFormatOldest, SnapshotFormatVersion)
	}
	s, err := state.NewStateStore()
	if err != nil {
		return nil, err
	}
	restore, err := s.Restore()
	if err != nil {
		return nil, err
	}
	defer restore.Abort()
	dec := codec.NewDecoder(br, structs.MsgpackHandle)
	rs := &restoreState{restore: restore, dec: dec, logger: logger, jobs: map[uint64]*structs.Job{}}
	var records uint64
	for {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("%w: truncated after %d records (no end record): %v", ErrSnapshotFormat, records, err)
		}
		t := SnapshotRecordType(b)
		if t == SnapshotRecordEnd {
			var tr snapshotTrailer
			if err := decodeRecord(dec, &tr); err != nil {
				return nil, fmt.Errorf("fsm: restore end record: %w", err)
			}
			if tr.Records != records {
				return nil, fmt.Errorf("%w: end record counts %d records, read %d", ErrSnapshotFormat, tr.Records, records)
			}
			break
		}
		if err := rs.record(t); err != nil {
			return nil, fmt.Errorf("fsm: restore record %d (type %d): %w", records, t, err)
		}
		records++
	}
	if err := restore.Commit(); err != nil {
		return nil, err
	}
	return s, nil
}

// restoreState is one restore in progress: the job versions read so far
// by Ref, for the allocations that name them.
type restoreState struct {
	restore *state.StateRestore
	dec     *codec.Decoder
	logger  hclog.Logger
	jobs    map[uint64]*structs.Job
}

// record decodes one record's object of type t and restores it.
func (rs *restoreState) record(t SnapshotRecordType) error {
	restore, dec, logger := rs.restore, rs.dec, rs.logger
	switch t {
	case SnapshotRecordAllocJob:
		var aj snapshotAllocJob
		if err := decodeRecord(dec, &aj); err != nil {
			return err
		}
		if aj.Ref == 0 || aj.Job == nil || aj.Job.ID == "" {
			return fmt.Errorf("%w: allocation job record: Ref must be non-zero and Job must have an ID", structs.ErrInvalid)
		}
		if _, dup := rs.jobs[aj.Ref]; dup {
			return fmt.Errorf("%w: allocation job record: Ref %d written twice", structs.ErrInvalid, aj.Ref)
		}
		rs.jobs[aj.Ref] = aj.Job
		return nil
	case SnapshotRecordAllocRef:
		var ar snapshotAllocRef
		if err := decodeRecord(dec, &ar); err != nil {
			return err
		}
		if ar.Alloc == nil {
			return fmt.Errorf("%w: allocation record without Alloc", structs.ErrInvalid)
		}
		if ar.JobRef != 0 {
			j := rs.jobs[ar.JobRef]
			if j == nil {
				return fmt.Errorf("%w: allocation %q: JobRef %d names no job record before it", structs.ErrInvalid, ar.Alloc.ID, ar.JobRef)
			}
			ar.Alloc.Job = j
		}
		return restore.AllocRestore(ar.Alloc)
	case SnapshotRecordJob:
		var j structs.Job
		if err := decodeRecord(dec, &j); err != nil {
			return err
		}
		return restore.JobRestore(&j)
	case SnapshotRecordNode:
		var n structs.Node
		if err := decodeRecord(dec, &n); err != nil {
			return err
		}
		return restore.NodeRestore(&n)
	case SnapshotRecordAlloc:
		var a structs.Allocation
		if err := decodeRecord(dec, &a); err != nil {
			return err
		}
		return restore.AllocRestore(&a)
	case SnapshotRecordEval:
		var e structs.Evaluation
		if err := decodeRecord(dec, &e); err != nil {
			return err
		}
		return restore.EvalRestore(&e)
	case SnapshotRecordACLPolicy:
		var p structs.ACLPolicy
		if err := decodeRecord(dec, &p); err != nil {
			return err
		}
		return restore.ACLPolicyRestore(&p)
	case SnapshotRecordACLToken:
		var tok structs.ACLToken
		if err := decodeRecord(dec, &tok); err != nil {
			return err
		}
		return restore.ACLTokenRestore(&tok)
	case SnapshotRecordACLBootstrap:
		var b structs.ACLBootstrap
		if err := decodeRecord(dec, &b); err != nil {
			return err
		}
		return restore.ACLBootstrapRestore(&b)
	case SnapshotRecordArtifact:
		var a structs.Artifact
		if err := decodeRecord(dec, &a); err != nil {
			return err
		}
		return restore.ArtifactRestore(&a)
	case SnapshotRecordServiceRegistration:
		var reg structs.ServiceRegistration
		if err := decodeRecord(dec, &reg); err != nil {
			return err
		}
		return restore.ServiceRegistrationRestore(&reg)
	case SnapshotRecordJobVersion:
		var j structs.Job
		if err := decodeRecord(dec, &j); err != nil {
			return err
		}
		return restore.JobVersionRestore(&j)
	case SnapshotRecordDeployment:
		var d structs.Deployment
		if err := decodeRecord(dec, &d); err != nil {
			return err
		}
		return restore.DeploymentRestore(&d)
	case SnapshotRecordPeriodicLaunch:
		var l structs.PeriodicLaunch
		if err := decodeRecord(dec, &l); err != nil {
			return err
		}
		return restore.PeriodicLaunchRestore(&l)
	case SnapshotRecordEndpointAlias:
		var a structs.EndpointAlias
		if err := decodeRecord(dec, &a); err != nil {
			return err
		}
		return restore.EndpointAliasRestore(&a)
	// Node pools.
	case SnapshotRecordNodePool:
		var p structs.NodePool
		if err := decodeRecord(dec, &p); err != nil {
			return err
		}
		return restore.NodePoolRestore(&p)
	case SnapshotRecordProvisionRequest:
		var pr structs.ProvisionRequest
		if err := decodeRecord(dec, &pr); err != nil {
			return err
		}
		return restore.ProvisionRequestRestore(&pr)
	case SnapshotRecordIndex:
		var ie state.IndexEntry
		if err := decodeRecord(dec, &ie); err != nil {
			return err
		}
		return restore.IndexRestore(ie.Key, ie.Value)
	default:
		var skip interface{}
		if err := decodeRecord(dec, &skip); err != nil {
			return err
		}
		logger.Warn("skipping unknown snapshot record type", "type", uint8(t))
		return nil
	}
}

// decodeRecord decodes one msgpack value into out, turning decoder errors
// and panics into errors wrapping structs.ErrDecode.
func decodeRecord(dec *codec.Decoder, out interface{}) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic in msgpack decoder: %v", structs.ErrDecode, r)
		}
	}()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %v", structs.ErrDecode, err)
	}
	return nil
}
