package servertest

import (
	"errors"
	"io"

	"github.com/hashicorp/raft"
)

// errCut is the error of an RPC whose answer arrived after a partition cut
// its peer off.
var errCut = errors.New("servertest: partitioned")

// cuttable is a node's outbound Raft transport: the node's in-memory
// transport, whose answers count only while the peer is not cut off.
// InmemTransport's Disconnect stops new RPCs only; an answer to one sent
// just before Partition would otherwise arrive after it and count as a
// quorum ack (a heartbeat crossing the cut confirmed a VerifyLeader issued
// after it, so a partitioned leader answered a consistent read). Pipelined
// replication is off, so every append goes through AppendEntries and is
// checked.
//
// Raft counts an answer as an ack only after the RPC returns (the
// heartbeat goroutine's notifyAll comes after its lastContact and metrics
// updates), so an answer that returned before Partition may still confirm
// a VerifyLeader issued after it. cuttable remembers, per target and
// replication goroutine, an answer that returned uncut until that
// goroutine's next RPC (it has then passed notifyAll); Partition waits for
// those to drain.
type cuttable struct {
	*raft.InmemTransport
	c  *Cluster
	nd *clusterNode
}

// ackKey names one of a leader's replication goroutines for a target:
// the heartbeat goroutine or the one that appends entries and installs
// snapshots. Each sends its RPCs one at a time.
type ackKey struct {
	target    raft.ServerAddress
	heartbeat bool
}

// isHeartbeat reports whether args is Raft's heartbeat (only the term and
// leader set). A replication append always carries the commit index,
// which is above zero once the cluster's first entry committed.
func isHeartbeat(args *raft.AppendEntriesRequest) bool {
	return len(args.Entries) == 0 && args.PrevLogEntry == 0 && args.LeaderCommitIndex == 0
}

// before marks that goroutine k has come back to the transport: any
// answer it had before has been counted by Raft.
func (t *cuttable) before(k ackKey) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.nd.acks, k)
}

// after turns the result of an RPC to target into errCut when target was
// cut off before or while it ran.
func (t *cuttable) after(target raft.ServerAddress, err error) error {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if err == nil && t.nd.cut[target] {
		return errCut
	}
	return err
}

// afterAck is after for an RPC whose answer Raft counts as an ack of its
// leadership: an uncut answer stays pending until goroutine k's next RPC.
func (t *cuttable) afterAck(k ackKey, err error) error {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if err == nil && t.nd.cut[k.target] {
		return errCut
	}
	if err == nil {
		t.nd.acks[k] = true
	}
	return err
}

// AppendEntriesPipeline implements raft.Transport: not supported, so
// replication uses AppendEntries.
func (t *cuttable) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// AppendEntries implements raft.Transport.
func (t *cuttable) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	k := ackKey{target: target, heartbeat: isHeartbeat(args)}
	t.before(k)
	return t.afterAck(k, t.InmemTransport.AppendEntries(id, target, args, resp))
}

// RequestVote implements raft.Transport.
func (t *cuttable) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.after(target, t.InmemTransport.RequestVote(id, target, args, resp))
}

// RequestPreVote implements raft.WithPreVote.
func (t *cuttable) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.after(target, t.InmemTransport.RequestPreVote(id, target, args, resp))
}

// InstallSnapshot implements raft.Transport.
func (t *cuttable) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	k := ackKey{target: target}
	t.before(k)
	return t.afterAck(k, t.InmemTransport.InstallSnapshot(id, target, args, resp, data))
}

// TimeoutNow implements raft.Transport.
func (t *cuttable) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.after(target, t.InmemTransport.TimeoutNow(id, target, args, resp))
}
