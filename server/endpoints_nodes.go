package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// NodeRegister registers or re-registers a client node through Raft and
// (re)arms its heartbeat timer. A node with an empty or initializing status
// is registered ready. It returns the heartbeat TTL: the node must call
// NodeUpdateStatus within it. Registering a node, or one becoming ready,
// unblocks blocked evaluations (the FSM reports the new capacity). It
// returns an error wrapping structs.ErrInvalid for a node without ID or
// name or with an unknown status, and errors wrapping structs.ErrNotLeader
// or structs.ErrShutdown.
func (s *Server) NodeRegister(ctx context.Context, node *structs.Node) (time.Duration, error) {
	if node == nil || node.ID == "" || node.Name == "" {
		return 0, fmt.Errorf("node register: %w: node ID and name are required", structs.ErrInvalid)
	}
	if err := node.ValidateNodeFields(); err != nil {
		return 0, fmt.Errorf("node register: %w", err)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.NodeRegister(fctx, node)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	n := node.Copy()
	// Node pools: a node without one is in "default"; one naming a pool
	// that does not exist creates it (the state store does, as Nomad).
	n.NodePool = structs.NodePoolOrDefault(n.NodePool)
	if n.NodePool == structs.NodePoolAll {
		return 0, fmt.Errorf("node register: %w: node pool %q cannot have nodes", structs.ErrInvalid, n.NodePool)
	}
	if !structs.ValidNodePoolName(n.NodePool) {
		return 0, fmt.Errorf("node register: %w: node pool %q (%d bytes): must be 1 to %d letters, digits, '-' or '_'", structs.ErrInvalid, truncateForError(n.NodePool), len(n.NodePool), structs.MaxNodePoolNameLen)
	}
	switch n.Status {
	case "", structs.NodeStatusInit:
		n.Status = structs.NodeStatusReady
	case structs.NodeStatusReady, structs.NodeStatusDown:
	default:
		return 0, fmt.Errorf("node register: %w: unknown status %q", structs.ErrInvalid, n.Status)
	}
	if old, err := s.fsm.State().NodeByID(nil, n.ID); err == nil && old != nil {
		// Eligibility and drain are the servers' to set (node drain,
		// node eligibility): a client registering again keeps them.
		n.SchedulingEligibility, n.DrainStrategy = old.SchedulingEligibility, old.DrainStrategy
	}
	if n.SchedulingEligibility == "" {
		n.SchedulingEligibility = structs.NodeSchedulingEligible
	}
	n.StatusUpdatedAt = time.Now().Unix()
	if _, _, err := s.raftApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n}); err != nil {
		return 0, fmt.Errorf("node register %s: %w", n.ID, err)
	}
	if n.Status == structs.NodeStatusDown {
		s.heartbeats.remove(n.ID)
		return 0, nil
	}
	return s.resetHeartbeatTimer(n.ID), nil
}

// NodeUpdateStatus is the node's heartbeat: it re-arms the node's TTL timer
// and writes to Raft only when status differs from the stored one. It
// returns the next TTL (0 for status down). It returns errors wrapping
// structs.ErrNotFound for an unknown node, structs.ErrInvalid for an
// unknown status, and structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) NodeUpdateStatus(ctx context.Context, nodeID, status string) (time.Duration, error) {
	return s.nodeHeartbeat(ctx, nodeID, status, nil)
}

// nodeHeartbeat is NodeUpdateStatus that also records gpus (validated by
// the caller) on the leader; see NodeHeartbeatGPUs.
func (s *Server) nodeHeartbeat(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (time.Duration, error) {
	switch status {
	case structs.NodeStatusInit, structs.NodeStatusReady, structs.NodeStatusDown:
	default:
		return 0, fmt.Errorf("node update status: %w: unknown status %q", structs.ErrInvalid, status)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.nodeHeartbeat(fctx, nodeID, status, gpus)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	node, err := s.fsm.State().NodeByID(nil, nodeID)
	if err != nil {
		return 0, fmt.Errorf("node update status %s: %w", nodeID, err)
	}
	if node == nil {
		return 0, fmt.Errorf("node %s: %w", nodeID, structs.ErrNotFound)
	}
	if node.Status != status {
		req := &structs.NodeUpdateStatusRequest{NodeID: nodeID, Status: status, UpdatedAt: time.Now().UnixNano()}
		if _, _, err := s.raftApply(structs.NodeUpdateStatusRequestType, req); err != nil {
			return 0, fmt.Errorf("node update status %s: %w", nodeID, err)
		}
	}
	if status == structs.NodeStatusDown {
		s.heartbeats.remove(nodeID)
		s.gpuUsage.forget(nodeID)
		if err := s.markNodeAllocsLost(nodeID); err != nil {
			return 0, fmt.Errorf("node update status %s: %w", nodeID, err)
		}
		return 0, nil
	}
	ttl := s.resetHeartbeatTimer(nodeID)
	s.gpuUsage.record(nodeID, gpus, time.Now(), ttl+s.config.HeartbeatGrace)
	return ttl, nil
}

// NodeList returns the nodes whose ID starts with q.Prefix, sorted by ID,
// without their secrets, as a blocking query on the nodes table.
func (s *Server) NodeList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Node, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		nodes, err := st.Nodes(ws)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*structs.Node, 0, len(nodes))
		for _, n := range nodes {
			if strings.HasPrefix(n.ID, prefix) {
				out = append(out, n.Stub())
			}
		}
		idx, err := st.Index(state.TableNodes)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Node), meta, nil
}

// NodeGet returns one node without its secret, by ID or by a unique ID
// prefix, as a blocking query on the nodes table. It returns an error
// wrapping structs.ErrNotFound when no node matches and structs.ErrInvalid
// when a prefix matches several.
func (s *Server) NodeGet(ctx context.Context, nodeID string, q *structs.QueryOptions) (*structs.Node, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.Index(state.TableNodes)
		if err != nil {
			return nil, 0, err
		}
		n, err := st.NodeByID(ws, nodeID)
		if err != nil || n != nil {
			return n, idx, err
		}
		if len(nodeID) < minPrefixLen {
			return (*structs.Node)(nil), idx, nil
		}
		nodes, err := st.Nodes(ws)
		if err != nil {
			return nil, 0, err
		}
		var matches []string
		for _, c := range nodes {
			if strings.HasPrefix(c.ID, nodeID) {
				n = c
				matches = append(matches, c.ID)
			}
		}
		if len(matches) > 1 {
			return nil, 0, ambiguous("node", nodeID, matches)
		}
		return n, idx, nil
	})
	if err != nil {
		return nil, meta, err
	}
	n, _ := resp.(*structs.Node)
	if n == nil {
		return nil, meta, fmt.Errorf("node %q: %w", nodeID, structs.ErrNotFound)
	}
	return n.Stub(), meta, nil
}

// NodeAllocations returns every allocation on a node, as a blocking query
// that wakes only when one of them changes or is removed; it is the
// client's watch. Its index is nodeAllocsWatch's: the highest ModifyIndex
// among them, raised when one is removed (garbage collection), and never
// below MinQueryIndex except after a restore to an older state.
func (s *Server) NodeAllocations(ctx context.Context, nodeID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	w := &nodeAllocsWatch{}
	if q != nil {
		w.minIndex = q.MinQueryIndex
	}
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		allocs, err := st.AllocsByNode(ws, nodeID)
		if err != nil {
			return nil, 0, err
		}
		table, err := st.Index(state.TableAllocs)
		if err != nil {
			return nil, 0, err
		}
		return allocs, w.index(allocs, table), nil
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Allocation), meta, nil
}
