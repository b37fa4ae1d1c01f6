// Package clienttest provides an in-memory fake of the servers a client
// talks to (it satisfies client.ServerConn) and helpers to build
// allocations, for tests of the client and of anything built on it.
package clienttest

import (
	"context"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// DefaultHeartbeatTTL is the TTL the fake server hands out.
const DefaultHeartbeatTTL = 10 * time.Second

// Server is an in-memory stand-in for the servers: it stores nodes and
// allocations, answers the node's blocking query and records client
// updates. Safe for concurrent use. The zero value is not usable; call
// NewServer.
type Server struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every index bump
	index   uint64
	ttl     time.Duration
	nodes   map[string]*structs.Node
	allocs  map[string]*structs.Allocation

	registrations int
	heartbeats    int
	updates       int
	// history holds, per allocation, a copy of each update taken, oldest
	// first (Updates).
	history map[string][]*structs.Allocation
	// gpus holds each node's GPU samples from its last heartbeat.
	gpus map[string][]*structs.GPUUsage
	// failRegister makes the next n NodeRegister calls fail.
	failRegister int
	// blobs is the artifact store (artifacts.go).
	blobs *Blobs
}

// NewServer returns an empty fake server at index 1.
func NewServer() *Server {
	return &Server{changed: make(chan struct{}), index: 1, ttl: DefaultHeartbeatTTL, nodes: map[string]*structs.Node{}, allocs: map[string]*structs.Allocation{}, blobs: NewBlobs()}
}

// bump advances the index and wakes blocking queries. Call with mu held.
func (s *Server) bump() uint64 {
	s.index++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.index
}

// SetHeartbeatTTL changes the TTL returned from now on.
func (s *Server) SetHeartbeatTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl = d
}

// FailNextRegistrations makes the next n NodeRegister calls fail.
func (s *Server) FailNextRegistrations(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRegister = n
}

// NodeRegister stores the node.
func (s *Server) NodeRegister(ctx context.Context, node *structs.Node) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if node == nil || node.ID == "" {
		return 0, fmt.Errorf("%w: node without an ID", structs.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failRegister > 0 {
		s.failRegister--
		return 0, fmt.Errorf("fake server: registration refused (%w)", structs.ErrNoLeader)
	}
	n := node.Copy()
	n.ModifyIndex = s.bump()
	if old, ok := s.nodes[n.ID]; ok {
		n.CreateIndex = old.CreateIndex
	} else {
		n.CreateIndex = n.ModifyIndex
	}
	n.StatusUpdatedAt = time.Now().Unix()
	s.nodes[n.ID] = n
	s.registrations++
	return s.ttl, nil
}

// NodeUpdateStatus records a heartbeat; unknown nodes get
// structs.ErrNotFound.
func (s *Server) NodeUpdateStatus(ctx context.Context, nodeID, status string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[nodeID]
	if !ok {
		return 0, fmt.Errorf("node %s: %w", nodeID, structs.ErrNotFound)
	}
	s.heartbeats++
	if n.Status != status {
		n.Status = status
		n.ModifyIndex = s.bump()
	}
	n.StatusUpdatedAt = time.Now().Unix()
	return s.ttl, nil
}

// NodeHeartbeatGPUs records a heartbeat with its GPU samples, refused as
// the real server refuses them (structs.ValidateGPUUsage).
func (s *Server) NodeHeartbeatGPUs(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (time.Duration, error) {
	if err := structs.ValidateGPUUsage(gpus); err != nil {
		return 0, err
	}
	ttl, err := s.NodeUpdateStatus(ctx, nodeID, status)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gpus == nil {
		s.gpus = map[string][]*structs.GPUUsage{}
	}
	s.gpus[nodeID] = gpus
	return ttl, nil
}

// LastGPUs returns the GPU samples of the node's last heartbeat.
func (s *Server) LastGPUs(nodeID string) []*structs.GPUUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gpus[nodeID]
}

// NodeAllocations returns copies of the node's allocations once the index
// passes q.MinQueryIndex, or at q.MaxQueryTime (default 5 minutes).
func (s *Server) NodeAllocations(ctx context.Context, nodeID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	var min uint64
	wait := structs.DefaultBlockingQueryWait
	if q != nil {
		min = q.MinQueryIndex
		if q.MaxQueryTime > 0 {
			wait = q.MaxQueryTime
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		idx, ch := s.index, s.changed
		if idx > min {
			var out []*structs.Allocation
			for _, a := range s.allocs {
				if a.NodeID == nodeID {
					out = append(out, a.Copy())
				}
			}
			s.mu.Unlock()
			return out, structs.QueryMeta{Index: idx, KnownLeader: true}, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, structs.QueryMeta{}, ctx.Err()
		case <-timer.C:
			// Answer with the unchanged state at the timeout.
			min = 0
		case <-ch:
		}
	}
}

// UpdateAllocs applies client status to stored allocations. An unknown
// allocation fails the call with structs.ErrNotFound after the known ones
// were applied.
func (s *Server) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing error
	for _, u := range allocs {
		a, ok := s.allocs[u.ID]
		if !ok {
			missing = fmt.Errorf("allocation %s: %w", u.ID, structs.ErrNotFound)
			continue
		}
		n := a.Copy()
		n.ClientStatus = u.ClientStatus
		n.ClientDescription = u.ClientDescription
		if u.TaskStates != nil {
			n.TaskStates = make(map[string]*structs.TaskState, len(u.TaskStates))
			for k, ts := range u.TaskStates {
				n.TaskStates[k] = ts.Copy()
			}
		}
		if len(u.Outputs) > 0 {
			n.Outputs = u.Copy().Outputs
		}
		if u.LogArchive != "" {
			n.LogArchive = u.LogArchive
		}
		if u.DeploymentStatus != nil && (n.DeploymentStatus == nil || n.DeploymentStatus.Healthy == nil) {
			// The deployment health verdict is taken once, as the state
			// store does.
			n.DeploymentStatus = u.DeploymentStatus.Copy()
		}
		if u.EndpointMember != nil {
			n.EndpointMember = u.EndpointMember.Copy()
		}
		n.ModifyIndex = s.bump()
		s.allocs[u.ID] = n
		s.updates++
		if s.history == nil {
			s.history = map[string][]*structs.Allocation{}
		}
		s.history[u.ID] = append(s.history[u.ID], u.Copy())
	}
	return missing
}

// UpsertAlloc stores a copy of a (placed by a pretend scheduler).
func (s *Server) UpsertAlloc(a *structs.Allocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := a.Copy()
	n.ModifyIndex = s.bump()
	if old, ok := s.allocs[n.ID]; ok {
		n.CreateIndex = old.CreateIndex
	} else {
		n.CreateIndex = n.ModifyIndex
	}
	s.allocs[n.ID] = n
}

// StopAlloc sets an allocation's desired status to stop.
func (s *Server) StopAlloc(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.allocs[id]
	if !ok {
		return fmt.Errorf("allocation %s: %w", id, structs.ErrNotFound)
	}
	n := a.Copy()
	n.DesiredStatus = structs.AllocDesiredStatusStop
	n.DesiredDescription = "alloc is being stopped"
	n.ModifyIndex = s.bump()
	s.allocs[id] = n
	return nil
}

// DeleteAlloc removes an allocation, as garbage collection would.
func (s *Server) DeleteAlloc(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.allocs, id)
	s.bump()
}

// Alloc returns a copy of the stored allocation, or nil.
func (s *Server) Alloc(id string) *structs.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allocs[id].Copy()
}

// Node returns a copy of the stored node, or nil.
func (s *Server) Node(id string) *structs.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[id].Copy()
}

// DeleteNode forgets a node, so its next heartbeat gets ErrNotFound.
func (s *Server) DeleteNode(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, id)
	s.bump()
}

// Counts returns how many registrations, heartbeats and alloc updates the
// server took.
func (s *Server) Counts() (registrations, heartbeats, updates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registrations, s.heartbeats, s.updates
}

// Updates returns a copy of each client update the server took for the
// allocation, oldest first.
func (s *Server) Updates(id string) []*structs.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*structs.Allocation, len(s.history[id]))
	for i, u := range s.history[id] {
		out[i] = u.Copy()
	}
	return out
}

// UpdateHistory returns "status: description" of each client update the
// server took for the allocation, oldest first.
func (s *Server) UpdateHistory(id string) []string {
	var out []string
	for _, u := range s.Updates(id) {
		out = append(out, u.ClientStatus+": "+u.ClientDescription)
	}
	return out
}

// WaitForAlloc polls until ok(alloc) holds for the stored allocation or
// the deadline passes, then fails the test with the last state seen.
func (s *Server) WaitForAlloc(t testing.TB, id string, within time.Duration, ok func(a *structs.Allocation) bool) *structs.Allocation {
	t.Helper()
	var a *structs.Allocation
	WaitFor(t, within, func() (bool, string) {
		a = s.Alloc(id)
		if a == nil {
			return false, "allocation " + id + " not stored"
		}
		return ok(a), fmt.Sprintf("allocation %s: client status %q (%s), task states %s", id, a.ClientStatus, a.ClientDescription, DescribeTaskStates(a.TaskStates))
	})
	return a
}

// WaitFor polls cond until it holds or within passes; then it fails the
// test with cond's last description (waittest.For).
func WaitFor(t testing.TB, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	waittest.For(t, within, "condition", cond)
}

// DescribeTaskStates renders task states and their events for failure
// messages.
func DescribeTaskStates(m map[string]*structs.TaskState) string {
	out := ""
	for name, ts := range m {
		out += fmt.Sprintf("\n  %s: %s failed=%v restarts=%d", name, ts.State, ts.Failed, ts.Restarts)
		for _, e := range ts.Events {
			out += fmt.Sprintf("\n    %s: %s", e.Type, e.DisplayMessage)
		}
	}
	return out
}

// Blobs is the fake's artifact store.
func (s *Server) Blobs() *Blobs { return s.blobs }

// ArtifactsMissing, ArtifactPut and ArtifactGet make the fake a
// client.ArtifactConn over its Blobs.
func (s *Server) ArtifactsMissing(ctx context.Context, nodeID string, digests []string) ([]string, error) {
	return s.blobs.ArtifactsMissing(ctx, nodeID, digests)
}

// ArtifactPut stores an upload in the fake's Blobs.
func (s *Server) ArtifactPut(ctx context.Context, nodeID, d string, r io.Reader, size int64, mediaType, jobID, allocID string) error {
	return s.blobs.ArtifactPut(ctx, nodeID, d, r, size, mediaType, jobID, allocID)
}

// ArtifactGet reads from the fake's Blobs.
func (s *Server) ArtifactGet(ctx context.Context, nodeID, d string) (io.ReadCloser, error) {
	return s.blobs.ArtifactGet(ctx, nodeID, d)
}
