package scheduler

import (
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// nodeUsage is what one node has and what is already taken on it: CPU in
// MHz and memory in MiB after reserved resources, and device instances in
// use. It is built once per evaluation attempt from the node's allocations
// that still hold resources (not client-terminal, so allocations this plan
// stops still count) and updated as the plan places more.
type nodeUsage struct {
	node             *structs.Node
	cpuCap, memCap   int64
	cpuUsed, memUsed int64
	// busy marks, per node device group and aligned with its Instances,
	// the instances in use.
	busy [][]bool
	// free counts, per node device group, the healthy instances not in use.
	free []int
	// gpuCap is the number of healthy device instances on the node and
	// gpuFree the number of those not in use.
	gpuCap, gpuFree int
}

func newNodeUsage(n *structs.Node, allocs []*structs.Allocation) *nodeUsage {
	u := &nodeUsage{node: n}
	var groups []*structs.DeviceGroup
	if r := n.NodeResources; r != nil {
		u.cpuCap, u.memCap = r.CPU, r.MemoryMB
		groups = r.Devices
	}
	if r := n.ReservedResources; r != nil {
		u.cpuCap -= r.CPU
		u.memCap -= r.MemoryMB
	}
	if len(groups) > 0 {
		u.busy = make([][]bool, len(groups))
		u.free = make([]int, len(groups))
		for gi, g := range groups {
			if g != nil {
				u.busy[gi] = make([]bool, len(g.Instances))
			}
		}
	}
	for _, a := range allocs {
		if a == nil || !a.HoldsResources() || a.AllocatedResources == nil {
			continue
		}
		for _, tr := range a.AllocatedResources.Tasks {
			if tr == nil {
				continue
			}
			u.cpuUsed += tr.CPU
			u.memUsed += tr.MemoryMB
			for _, d := range tr.Devices {
				if d != nil {
					u.markBusy(groups, d.DeviceIDs)
				}
			}
		}
	}
	for gi, g := range groups {
		if g == nil {
			continue
		}
		for ii, in := range g.Instances {
			if in == nil || !in.Healthy {
				continue
			}
			u.gpuCap++
			if !u.busy[gi][ii] {
				u.free[gi]++
			}
		}
	}
	u.gpuFree = 0
	for _, f := range u.free {
		u.gpuFree += f
	}
	return u
}

// markBusy marks the instances named by ids as in use. Nodes hold few
// instances, so a linear search is cheaper than building a map per node.
// IDs the node does not have are ignored.
func (u *nodeUsage) markBusy(groups []*structs.DeviceGroup, ids []string) {
	for _, id := range ids {
	search:
		for gi, g := range groups {
			if g == nil {
				continue
			}
			for ii, in := range g.Instances {
				if in != nil && in.ID == id {
					u.busy[gi][ii] = true
					break search
				}
			}
		}
	}
}

// take marks count free healthy instances of device group gi as used and
// returns their IDs, lowest-sorted first. It returns fewer when fewer are
// free.
func (u *nodeUsage) take(gi, count int) []string {
	g := u.node.NodeResources.Devices[gi]
	idx := make([]int, 0, len(g.Instances))
	for ii, in := range g.Instances {
		if in != nil && in.Healthy && !u.busy[gi][ii] {
			idx = append(idx, ii)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return g.Instances[idx[a]].ID < g.Instances[idx[b]].ID })
	if len(idx) > count {
		idx = idx[:count]
	}
	out := make([]string, len(idx))
	for k, ii := range idx {
		u.busy[gi][ii] = true
		out[k] = g.Instances[ii].ID
	}
	u.free[gi] -= len(idx)
	u.gpuFree -= len(idx)
	return out
}

// usageIndex caches nodeUsage per node for one evaluation attempt, reading
// each node's allocations from the state at most once.
type usageIndex struct {
	state State
	nodes map[string]*nodeUsage
}

func newUsageIndex(state State) *usageIndex {
	return &usageIndex{state: state, nodes: map[string]*nodeUsage{}}
}

func (x *usageIndex) get(n *structs.Node) (*nodeUsage, error) {
	if u, ok := x.nodes[n.ID]; ok {
		return u, nil
	}
	allocs, err := x.state.AllocsByNode(n.ID)
	if err != nil {
		return nil, err
	}
	u := newNodeUsage(n, allocs)
	x.nodes[n.ID] = u
	return u, nil
}
