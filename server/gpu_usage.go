package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// gpuUsage keeps, in the leader's memory only, each node's latest GPU
// samples as its heartbeat brought them: the GPU idleness rule of a node
// pool is evaluated on the leader, so nothing is written to Raft per
// heartbeat. A sample is valid until the node's heartbeat deadline (the
// TTL handed with it plus the grace); a later heartbeat without samples
// drops it. After a failover the new leader knows no sample until each
// node's next heartbeat, and its provisioner starts every node's GPU idle
// window afresh: a failover can only delay a GPU-idle scale-in, never
// hasten it.
type gpuUsage struct {
	mu        sync.Mutex
	byNode    map[string]gpuSample
	lastPrune time.Time
}

type gpuSample struct {
	until time.Time
	gpus  []*structs.GPUUsage
}

// gpuUsagePruneEvery is how often expired samples are dropped (on a
// heartbeat), bounding the map by the nodes heartbeating recently.
const gpuUsagePruneEvery = time.Minute

func (u *gpuUsage) record(nodeID string, gpus []*structs.GPUUsage, now time.Time, valid time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byNode == nil {
		u.byNode = map[string]gpuSample{}
	}
	if now.Sub(u.lastPrune) >= gpuUsagePruneEvery {
		for id, s := range u.byNode {
			if now.After(s.until) {
				delete(u.byNode, id)
			}
		}
		u.lastPrune = now
	}
	if len(gpus) == 0 || valid <= 0 {
		delete(u.byNode, nodeID)
		return
	}
	cp := make([]*structs.GPUUsage, len(gpus))
	for i, g := range gpus {
		c := *g
		cp[i] = &c
	}
	u.byNode[nodeID] = gpuSample{until: now.Add(valid), gpus: cp}
}

func (u *gpuUsage) forget(nodeID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.byNode, nodeID)
}

// stats returns node's valid samples as device stats, one per GPU
// instance of the node (a GPU without a sample carries an Error, so a GPU
// rule does not hold); nil when the node has no valid sample.
func (u *gpuUsage) stats(node *structs.Node, now time.Time) *structs.NodeDeviceStats {
	u.mu.Lock()
	s, ok := u.byNode[node.ID]
	u.mu.Unlock()
	if !ok || now.After(s.until) || node.NodeResources == nil {
		return nil
	}
	byID := make(map[string]*structs.GPUUsage, len(s.gpus))
	for _, g := range s.gpus {
		byID[g.ID] = g
	}
	out := &structs.NodeDeviceStats{NodeID: node.ID, SampledAt: s.until.UnixNano()}
	for _, g := range node.NodeResources.Devices {
		if g == nil || g.Type != structs.DeviceTypeGPU {
			continue
		}
		for _, in := range g.Instances {
			if in == nil {
				continue
			}
			ds := &structs.DeviceStats{ID: in.ID, Vendor: g.Vendor, Type: g.Type, Name: g.Name, Healthy: in.Healthy}
			switch smp := byID[in.ID]; {
			case smp == nil:
				ds.Error = "no sample in the last heartbeat"
			case smp.Failed:
				ds.Error = "the client could not read the device"
			default:
				ds.UtilizationPercent, ds.MemoryUsedMiB = smp.UtilizationPercent, smp.MemoryUsedMiB
			}
			out.Devices = append(out.Devices, ds)
		}
	}
	return out
}

// NodeHeartbeatGPUs is the heartbeat with the node's latest GPU samples
// (see NodeUpdateStatus): the leader keeps them in memory for node pools'
// GPU idleness rules. It returns an error wrapping structs.ErrInvalid for
// samples ValidateGPUUsage refuses.
func (s *Server) NodeHeartbeatGPUs(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (time.Duration, error) {
	if err := structs.ValidateGPUUsage(gpus); err != nil {
		return 0, fmt.Errorf("node heartbeat %s: %w", nodeID, err)
	}
	return s.nodeHeartbeat(ctx, nodeID, status, gpus)
}

// provisionDeviceStats is the provisioner's default DeviceStats: the GPU
// samples the node's heartbeats brought to this leader.
func (s *Server) provisionDeviceStats(_ context.Context, node *structs.Node) (*structs.NodeDeviceStats, error) {
	return s.gpuUsage.stats(node, time.Now()), nil
}
