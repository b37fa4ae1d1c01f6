package scheduler

import (
	"slices"

	"github.com/gpulayer/gpulayer/structs"
)

// nodeUsage is what one node has and what is already taken on it: CPU in
// MHz and memory in MiB after reserved resources (on a unified-memory node
// also after the OS reserve, with device memory shares charged to host
// memory), and device instances in use, whole or by memory shares. It is
// built once per evaluation attempt from the node's allocations that still
// hold resources (not client-terminal, so allocations this plan stops still
// count) and updated as the plan places more.
type nodeUsage struct {
	node             *structs.Node
	unified          bool
	cpuCap, memCap   int64
	cpuUsed, memUsed int64
	// allocs are the node's allocations that hold resources.
	allocs []*structs.Allocation
	// busy marks, per node device group and aligned with its Instances,
	// the instances held whole.
	busy [][]bool
	// shared holds, per node device group and aligned with its Instances,
	// the MiB of memory shares held; nil for a group with none.
	shared [][]int64
	// groupMem is each device group's memory in MiB.
	groupMem []int64
	// free counts, per node device group, the healthy instances neither
	// held whole nor shared.
	free []int
	// gpuCap is the number of healthy device instances on the node and
	// gpuFree the number of those not in use.
	gpuCap, gpuFree int
	// ports are the host ports in use (ports.go).
	ports portUsage
}

func newNodeUsage(n *structs.Node, allocs []*structs.Allocation) *nodeUsage {
	u := &nodeUsage{node: n, unified: n.IsUnified(), cpuCap: n.HostCPUMHz(), memCap: n.HostMemoryMiB(), ports: newPortUsage(n)}
	var groups []*structs.DeviceGroup
	if r := n.NodeResources; r != nil {
		groups = r.Devices
	}
	if len(groups) > 0 {
		u.busy = make([][]bool, len(groups))
		u.shared = make([][]int64, len(groups))
		u.free = make([]int, len(groups))
		u.groupMem = make([]int64, len(groups))
		for gi, g := range groups {
			if g != nil {
				u.busy[gi] = make([]bool, len(g.Instances))
				u.groupMem[gi] = g.MemoryMiB()
			}
		}
	}
	for _, a := range allocs {
		if a == nil || !a.HoldsResources() || a.AllocatedResources == nil {
			continue
		}
		u.allocs = append(u.allocs, a)
		u.add(a.AllocatedResources, 1)
		if sh := a.AllocatedResources.Shared; sh != nil && sh.Endpoint != nil {
			u.ports.addEndpoint(structs.EndpointOwner(a), sh.Endpoint.Port, 1)
		}
	}
	u.recount()
	return u
}

// recount recomputes free, gpuCap and gpuFree from busy and shared.
func (u *nodeUsage) recount() {
	u.gpuCap, u.gpuFree = 0, 0
	if u.node.NodeResources == nil {
		return
	}
	for gi, g := range u.node.NodeResources.Devices {
		if g == nil {
			continue
		}
		u.free[gi] = 0
		for ii, in := range g.Instances {
			if in == nil || !in.Healthy {
				continue
			}
			u.gpuCap++
			if !u.busy[gi][ii] && u.sharedAt(gi, ii) == 0 {
				u.free[gi]++
			}
		}
		u.gpuFree += u.free[gi]
	}
}

func (u *nodeUsage) sharedAt(gi, ii int) int64 {
	if u.shared[gi] == nil {
		return 0
	}
	return u.shared[gi][ii]
}

// add counts (sign 1) or releases (sign -1) an allocation's resources,
// without updating the free counts (see recount).
func (u *nodeUsage) add(ar *structs.AllocatedResources, sign int64) {
	var groups []*structs.DeviceGroup
	if u.node.NodeResources != nil {
		groups = u.node.NodeResources.Devices
	}
	u.ports.add(ar.Shared, int(sign))
	for _, tr := range ar.Tasks {
		if tr == nil {
			continue
		}
		u.cpuUsed += sign * tr.CPU
		u.memUsed += sign * tr.MemoryMB
		for _, d := range tr.Devices {
			if d == nil {
				continue
			}
			for _, id := range d.DeviceIDs {
				gi, ii := findInstance(groups, id)
				if gi < 0 {
					continue
				}
				if d.MemoryMB > 0 {
					if u.shared[gi] == nil {
						u.shared[gi] = make([]int64, len(groups[gi].Instances))
					}
					u.shared[gi][ii] += sign * d.MemoryMB
					if u.unified {
						u.memUsed += sign * d.MemoryMB
					}
					continue
				}
				u.busy[gi][ii] = sign > 0
			}
		}
	}
}

// findInstance returns the group and instance index of the device instance
// id, or -1, -1. Nodes hold few instances, so a linear search is cheaper
// than building a map per node.
func findInstance(groups []*structs.DeviceGroup, id string) (int, int) {
	for gi, g := range groups {
		if g == nil {
			continue
		}
		for ii, in := range g.Instances {
			if in != nil && in.ID == id {
				return gi, ii
			}
		}
	}
	return -1, -1
}

// clone returns a deep copy, for trying out preemption.
func (u *nodeUsage) clone() *nodeUsage {
	c := *u
	c.allocs = slices.Clone(u.allocs)
	c.busy = make([][]bool, len(u.busy))
	for i := range u.busy {
		c.busy[i] = slices.Clone(u.busy[i])
	}
	c.shared = make([][]int64, len(u.shared))
	for i := range u.shared {
		c.shared[i] = slices.Clone(u.shared[i])
	}
	c.free = slices.Clone(u.free)
	c.ports = u.ports.clone()
	return &c
}

// release takes an allocation's resources off the usage.
func (u *nodeUsage) release(ar *structs.AllocatedResources) {
	if ar == nil {
		return
	}
	u.add(ar, -1)
	u.recount()
}

// usageIndex caches nodeUsage per node for one evaluation attempt, reading
// each node's allocations from the state at most once. Resources reserved
// for a waiting preemptor (see reservations) count as used.
type usageIndex struct {
	state   State
	nodes   map[string]*nodeUsage
	reserve *reservations
}

func newUsageIndex(state State, job *structs.Job) *usageIndex {
	return &usageIndex{state: state, nodes: map[string]*nodeUsage{}, reserve: &reservations{state: state, job: job}}
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
	held := false
	for _, a := range allocs {
		if a == nil || a.DesiredStatus != structs.AllocDesiredStatusEvict {
			continue
		}
		ok, err := x.reserve.holds(a)
		if err != nil {
			return nil, err
		}
		if ok {
			u.add(a.AllocatedResources, 1)
			held = true
		}
	}
	if held {
		u.recount()
	}
	x.nodes[n.ID] = u
	return u, nil
}
