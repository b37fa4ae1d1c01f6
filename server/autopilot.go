package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// reconcileLoop runs on the leader while it has gossip: every
// ReconcileInterval and on every member event it reconciles the gossip
// members with the Raft configuration (reconcileMembers).
func (s *Server) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(s.config.ReconcileInterval)
	defer t.Stop()
	for {
		s.reconcileMembers()
		select {
		case <-ctx.Done():
			return
		case <-s.members.reconcile:
		case <-t.C:
		}
	}
}

// reconcileMembers brings the Raft configuration in line with gossip, as
// Nomad's leader reconcile and Consul's autopilot dead-server cleanup do:
//
//   - an alive server of this datacenter that is not a voter (or whose Raft
//     address changed) is added with AddVoter, once its Raft address is
//     proven (verifyRaftPeer) and only when gossip is encrypted or Raft
//     runs over TLS (or AllowUnauthenticatedGossip is set): otherwise a
//     gossip member's claim to be a server proves nothing;
//   - a server that left gracefully is removed;
//   - a server that has failed, or that is in Raft but unknown to gossip,
//     for longer than DeadServerCleanupThreshold is removed, one at a time,
//     and only while the voters left are at least BootstrapExpect (so a
//     dead server is removed once a replacement has joined, and a
//     three-server cluster with one dead server keeps its seat for it).
//
// Errors are logged; the next pass retries.
func (s *Server) reconcileMembers() {
	m := s.members
	log := m.logger.Named("autopilot")
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		log.Warn("read raft configuration", "error", err)
		return
	}
	conf := f.Configuration()
	inRaft := map[raft.ServerID]raft.Server{}
	voters := 0
	for _, srv := range conf.Servers {
		inRaft[srv.ID] = srv
		if srv.Suffrage == raft.Voter {
			voters++
		}
	}
	self := raft.ServerID(s.config.NodeName)
	members := map[raft.ServerID]Member{}
	for _, mem := range m.snapshot() {
		if mem.Datacenter != s.config.Datacenter {
			continue
		}
		id := raft.ServerID(mem.Name)
		members[id] = mem
		srv, ok := inRaft[id]
		switch mem.Status {
		case MemberAlive:
			if mem.RaftAddr == "" || (ok && srv.Suffrage == raft.Voter && string(srv.Address) == mem.RaftAddr) {
				continue
			}
			if id != self && !s.config.gossipVotersAllowed() {
				// Unauthenticated gossip: the member's claim to be a
				// server proves nothing.
				m.warnUnverified(mem.Name, "not adding server to raft", ErrUnauthenticatedGossip)
				continue
			}
			if err := s.verifyRaftPeer(mem.RaftAddr); err != nil {
				m.warnUnverified(mem.Name, "not adding server to raft", err)
				continue
			}
			if err := s.raft.AddVoter(id, raft.ServerAddress(mem.RaftAddr), 0, raftChangeTimeout).Error(); err != nil {
				log.Warn("add voter", "server", mem.Name, "raft_addr", mem.RaftAddr, "error", err)
				continue
			}
			if !ok {
				voters++
			}
			log.Info("added server to raft", "server", mem.Name, "raft_addr", mem.RaftAddr)
		case MemberLeft:
			if !ok || id == self {
				if !ok {
					m.forget(mem.Name)
				}
				continue
			}
			if err := s.raft.RemoveServer(id, 0, raftChangeTimeout).Error(); err != nil {
				log.Warn("remove left server", "server", mem.Name, "error", err)
				continue
			}
			if srv.Suffrage == raft.Voter {
				voters--
			}
			m.forget(mem.Name)
			log.Info("removed server that left", "server", mem.Name)
		}
	}

	// Dead server cleanup.
	expect := max(s.config.BootstrapExpect, 1)
	now := time.Now()
	m.mu.Lock()
	for id := range m.missingSince {
		if _, ok := inRaft[id]; !ok {
			delete(m.missingSince, id)
		}
	}
	m.mu.Unlock()
	for _, srv := range conf.Servers {
		if srv.ID == self {
			continue
		}
		mem, known := members[srv.ID]
		var since time.Time
		switch {
		case known && mem.Status == MemberAlive:
			m.mu.Lock()
			delete(m.missingSince, srv.ID)
			m.mu.Unlock()
			continue
		case known && mem.Status == MemberFailed:
			since = mem.StatusSince
		case known:
			continue // left: handled above
		default:
			m.mu.Lock()
			if _, ok := m.missingSince[srv.ID]; !ok {
				m.missingSince[srv.ID] = now
			}
			since = m.missingSince[srv.ID]
			m.mu.Unlock()
		}
		if now.Sub(since) < s.config.DeadServerCleanupThreshold {
			continue
		}
		if srv.Suffrage == raft.Voter && voters-1 < expect {
			continue // no replacement yet: keep the seat
		}
		if err := s.raft.RemoveServer(srv.ID, 0, raftChangeTimeout).Error(); err != nil {
			log.Warn("remove dead server", "server", srv.ID, "error", err)
			return
		}
		log.Warn("removed dead server from raft", "server", srv.ID, "address", srv.Address, "failed_for", now.Sub(since).Round(time.Second))
		return // one removal per pass
	}
}
