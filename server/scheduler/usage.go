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
	// used holds every device instance ID in use on the node.
	used map[string]struct{}
	// free counts, per node device group, the healthy instances not in use.
	free []int
	// gpuCap is the number of healthy device instances on the node.
	gpuCap int
	// sorted holds, per device group, the healthy instance IDs in order;
	// built on first use.
	sorted [][]string
}

func newNodeUsage(n *structs.Node, allocs []*structs.Allocation) *nodeUsage {
	u := &nodeUsage{node: n, used: map[string]struct{}{}}
	var groups []*structs.DeviceGroup
	if r := n.NodeResources; r != nil {
		u.cpuCap, u.memCap = r.CPU, r.MemoryMB
		groups = r.Devices
	}
	if r := n.ReservedResources; r != nil {
		u.cpuCap -= r.CPU
		u.memCap -= r.MemoryMB
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
				if d == nil {
					continue
				}
				for _, id := range d.DeviceIDs {
					u.used[id] = struct{}{}
				}
			}
		}
	}
	u.free = make([]int, len(groups))
	u.sorted = make([][]string, len(groups))
	for gi, g := range groups {
		if g == nil {
			continue
		}
		for _, in := range g.Instances {
			if in == nil || !in.Healthy {
				continue
			}
			u.gpuCap++
			if _, busy := u.used[in.ID]; !busy {
				u.free[gi]++
			}
		}
	}
	return u
}

// gpuFree is the number of healthy device instances not in use.
func (u *nodeUsage) gpuFree() int {
	n := 0
	for _, f := range u.free {
		n += f
	}
	return n
}

// take marks count free instances of device group gi as used and returns
// their IDs, lowest-sorted first. It returns fewer when fewer are free.
func (u *nodeUsage) take(gi, count int) []string {
	if u.sorted[gi] == nil {
		g := u.node.NodeResources.Devices[gi]
		ids := make([]string, 0, len(g.Instances))
		for _, in := range g.Instances {
			if in != nil && in.Healthy {
				ids = append(ids, in.ID)
			}
		}
		sort.Strings(ids)
		u.sorted[gi] = ids
	}
	out := make([]string, 0, count)
	for _, id := range u.sorted[gi] {
		if len(out) == count {
			break
		}
		if _, busy := u.used[id]; busy {
			continue
		}
		u.used[id] = struct{}{}
		u.free[gi]--
		out = append(out, id)
	}
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
