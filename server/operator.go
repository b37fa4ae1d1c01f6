package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

// raftChangeTimeout bounds a Raft configuration change (add or remove a
// server).
const raftChangeTimeout = 10 * time.Second

// RaftPeer is one server of the Raft configuration, as
// `gpulayer operator raft list-peers` shows it.
type RaftPeer struct {
	// ID is the server's Raft ID (its name).
	ID string
	// Address is its Raft address, "host:port".
	Address string
	// Leader reports whether it is the current leader.
	Leader bool
	// Voter reports whether it votes (a nonvoter only replicates).
	Voter bool
}

// RaftPeers returns the servers of the latest Raft configuration, sorted by
// ID. Any server can answer; a follower's view may lag a configuration
// change by a heartbeat. It returns Raft's error when the configuration
// cannot be read (e.g. during shutdown).
func (s *Server) RaftPeers() ([]RaftPeer, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	_, leaderID := s.raft.LeaderWithID()
	var out []RaftPeer
	for _, srv := range f.Configuration().Servers {
		out = append(out, RaftPeer{
			ID:      string(srv.ID),
			Address: string(srv.Address),
			Leader:  srv.ID == leaderID,
			Voter:   srv.Suffrage == raft.Voter,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// RemoveRaftPeer removes the server whose Raft ID or address is idOrAddr
// from the Raft configuration (`operator raft remove-peer`); use it for a
// server that is gone for good. It must run on the leader. It returns
// errors wrapping structs.ErrInvalid for an empty argument or an attempt to
// remove the leader itself, structs.ErrNotFound when no server matches,
// and structs.ErrNotLeader (forward to the leader) or structs.ErrShutdown.
func (s *Server) RemoveRaftPeer(ctx context.Context, idOrAddr string) error {
	if idOrAddr == "" {
		return fmt.Errorf("remove raft peer: %w: give a server ID or address", structs.ErrInvalid)
	}
	if err := s.checkLeader(); err != nil {
		return fmt.Errorf("remove raft peer: %w", err)
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("remove raft peer: %w", err)
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) != idOrAddr && string(srv.Address) != idOrAddr {
			continue
		}
		if srv.ID == raft.ServerID(s.config.NodeName) {
			return fmt.Errorf("remove raft peer %q: %w: it is the leader; stop it or transfer leadership first", idOrAddr, structs.ErrInvalid)
		}
		if err := s.raft.RemoveServer(srv.ID, 0, raftChangeTimeout).Error(); err != nil {
			return fmt.Errorf("remove raft peer %q: %w", idOrAddr, raftErr(err))
		}
		s.logger.Info("removed raft peer", "id", srv.ID, "address", srv.Address)
		return nil
	}
	return fmt.Errorf("raft peer %q: %w", idOrAddr, structs.ErrNotFound)
}

// VerifyLeader confirms that this server still leads a quorum (Raft's
// VerifyLeader: a round of heartbeats) and has established leadership (its
// state holds every committed entry), for a consistent read. It returns an
// error wrapping structs.ErrNotLeader when it does not (forward the read to
// the leader, or retry), structs.ErrShutdown, or ctx's error.
func (s *Server) VerifyLeader(ctx context.Context) error {
	if err := s.checkLeader(); err != nil {
		return err
	}
	if !s.established.Load() {
		// Consul's isReadyForConsistentReads: until the new leader's
		// barrier has applied every committed entry, its state may lag.
		return fmt.Errorf("verify leader: %w: leadership not yet established", structs.ErrNotLeader)
	}
	f := s.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("verify leader: %w", raftErr(err))
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("verify leader: %w", ctx.Err())
	}
}

// raftErr maps Raft's leadership and shutdown errors to the structs
// sentinels, keeping Raft's text.
func raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", structs.ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", structs.ErrShutdown, err)
	}
	return err
}
