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
type cuttable struct {
	*raft.InmemTransport
	c  *Cluster
	nd *clusterNode
}

func (t *cuttable) cutFrom(target raft.ServerAddress) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.nd.cut[target]
}

// after turns the result of an RPC to target into errCut when target was
// cut off before or while it ran.
func (t *cuttable) after(target raft.ServerAddress, err error) error {
	if err == nil && t.cutFrom(target) {
		return errCut
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
	return t.after(target, t.InmemTransport.AppendEntries(id, target, args, resp))
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
	return t.after(target, t.InmemTransport.InstallSnapshot(id, target, args, resp, data))
}

// TimeoutNow implements raft.Transport.
func (t *cuttable) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.after(target, t.InmemTransport.TimeoutNow(id, target, args, resp))
}
