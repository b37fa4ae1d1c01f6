package server

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Heartbeat defaults, as in Nomad (nomad/config.go): a node's TTL is at
// least 10 seconds, scaled so the cluster sends at most 50 heartbeats per
// second, plus a random stagger of up to the TTL again; a node that misses
// its TTL plus a 10-second grace is marked down. A new leader gives every
// known node 5 minutes to check in.
const (
	DefaultMinHeartbeatTTL      = 10 * time.Second
	DefaultHeartbeatGrace       = 10 * time.Second
	DefaultFailoverHeartbeatTTL = 5 * time.Minute
	maxHeartbeatsPerSecond      = 50.0
)

// heartbeats holds one timer per node; a timer that fires marks its node
// down.
type heartbeats struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
}

func newHeartbeats() *heartbeats { return &heartbeats{timers: map[string]*time.Timer{}} }

func (h *heartbeats) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.timers)
}

// reset (re)arms nodeID's timer to call fn after d.
func (h *heartbeats) reset(nodeID string, d time.Duration, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.timers[nodeID]; ok {
		t.Stop()
	}
	h.timers[nodeID] = time.AfterFunc(d, fn)
}

// remove stops nodeID's timer.
func (h *heartbeats) remove(nodeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.timers[nodeID]; ok {
		t.Stop()
		delete(h.timers, nodeID)
	}
}

// clear stops every timer.
func (h *heartbeats) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, t := range h.timers {
		t.Stop()
		delete(h.timers, id)
	}
}

// heartbeatTTL returns the TTL for the next heartbeat: Nomad's
// lib.RateScaledInterval (max(MinHeartbeatTTL, nodes/50 seconds)) plus a
// random stagger of up to that interval, so heartbeats spread out.
func (s *Server) heartbeatTTL() time.Duration {
	n := s.heartbeats.count()
	ttl := time.Duration(float64(n) / maxHeartbeatsPerSecond * float64(time.Second))
	if ttl < s.config.MinHeartbeatTTL {
		ttl = s.config.MinHeartbeatTTL
	}
	return ttl + rand.N(ttl)
}

// resetHeartbeatTimer arms nodeID's timer for a fresh TTL plus the grace
// and returns the TTL to hand to the node.
func (s *Server) resetHeartbeatTimer(nodeID string) time.Duration {
	ttl := s.heartbeatTTL()
	s.heartbeats.reset(nodeID, ttl+s.config.HeartbeatGrace, func() { s.invalidateHeartbeat(nodeID) })
	return ttl
}

// initializeHeartbeatTimers gives every node that is not down the failover
// TTL, so nodes that heartbeated the previous leader are not marked down
// before they find this one.
func (s *Server) initializeHeartbeatTimers() error {
	nodes, err := s.fsm.State().Nodes(nil)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Status == structs.NodeStatusDown {
			continue
		}
		id := n.ID
		s.heartbeats.reset(id, s.config.FailoverHeartbeatTTL, func() { s.invalidateHeartbeat(id) })
	}
	return nil
}

// invalidateHeartbeat marks a node that missed its heartbeat down through
// Raft, then marks its allocations lost and creates evaluations that
// replace them (markNodeAllocsLost).
func (s *Server) invalidateHeartbeat(nodeID string) {
	s.heartbeats.remove(nodeID)
	if !s.IsLeader() || s.shutdownCtx.Err() != nil {
		return
	}
	log := s.logger.Named("heartbeat")
	node, err := s.fsm.State().NodeByID(nil, nodeID)
	if err != nil || node == nil || node.Status == structs.NodeStatusDown {
		return
	}
	req := &structs.NodeUpdateStatusRequest{NodeID: nodeID, Status: structs.NodeStatusDown, UpdatedAt: time.Now().UnixNano()}
	if _, _, err := s.raftApply(structs.NodeUpdateStatusRequestType, req); err != nil {
		log.Error("mark node down", "node_id", nodeID, "error", err)
		return
	}
	log.Warn("node missed its heartbeat; marked down", "node_id", nodeID, "node_name", node.Name)
	if err := s.markNodeAllocsLost(nodeID); err != nil {
		// The next leader's sweep (sweepDownNodes) finishes the job.
		log.Error("mark allocations of a down node lost", "node_id", nodeID, "error", err)
	}
}
