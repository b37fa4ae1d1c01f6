package structs

import (
	"fmt"
	"sort"
)

// UnifiedOSReserveMiB returns the host memory, in MiB, kept back for the
// operating system on a unified-memory node whose total memory is
// totalMiB: a quarter of it, at least 4 GiB. The figure follows macOS,
// whose Metal recommendedMaxWorkingSetSize lets the GPU use about three
// quarters of RAM on Apple Silicon.
func UnifiedOSReserveMiB(totalMiB int64) int64 {
	return max(totalMiB/4, 4096)
}

// HostMemoryMiB returns the node memory allocations may use, in MiB: its
// total minus its reserved memory; on a unified-memory node at least
// UnifiedOSReserveMiB is kept back.
func (n *Node) HostMemoryMiB() int64 {
	if n.NodeResources == nil {
		return 0
	}
	total := n.NodeResources.MemoryMB
	var reserve int64
	if n.ReservedResources != nil {
		reserve = n.ReservedResources.MemoryMB
	}
	if n.IsUnified() {
		reserve = max(reserve, UnifiedOSReserveMiB(total))
	}
	return total - reserve
}

// HostCPUMHz returns the node CPU allocations may use: its total minus its
// reserved CPU, in MHz.
func (n *Node) HostCPUMHz() int64 {
	if n.NodeResources == nil {
		return 0
	}
	c := n.NodeResources.CPU
	if n.ReservedResources != nil {
		c -= n.ReservedResources.CPU
	}
	return c
}

// MemoryMiB returns the group's "memory" attribute in MiB (an integer with
// unit MiB, GiB or none meaning MiB), or 0 when it has none.
func (g *DeviceGroup) MemoryMiB() int64 {
	a := g.Attributes["memory"]
	if a == nil || a.Int == nil {
		return 0
	}
	switch a.Unit {
	case "GiB":
		return *a.Int * 1024
	case "", "MiB":
		return *a.Int
	}
	return 0
}

// sharedMiB returns the device memory shares the task holds, in MiB.
func (tr *AllocatedTaskResources) sharedMiB() int64 {
	var s int64
	for _, d := range tr.Devices {
		if d != nil && d.MemoryMB > 0 {
			s += d.MemoryMB * int64(len(d.DeviceIDs))
		}
	}
	return s
}

// AllocsFit reports whether allocs (every allocation that would be on node
// n; those that do not hold resources are skipped) fit the node together:
//
//   - their CPU (MHz) and memory (MiB) sum within HostCPUMHz and
//     HostMemoryMiB; on a unified-memory node device memory shares count
//     against host memory too;
//   - every device instance an allocation created in this plan
//     (CreateIndex 0) names exists on the node, in the group it names, and
//     is healthy (allocations already placed keep what they hold);
//   - an instance is held whole by one allocation, or shared by memory
//     shares whose sum is within the group's memory; never both;
//   - every host port (AllocatedResources.Shared.Ports) is given to one
//     allocation at most once, and a new allocation's ports are 1-65535
//     and not reserved on the node (Node.ReservedPorts);
//   - an endpoint's router port (Shared.Endpoint) is shared by the members
//     of that one endpoint (EndpointOwner) only: no task port and no other
//     endpoint holds it, and a new one is 1-65535 and not reserved.
//
// reason explains the first problem found.
func AllocsFit(n *Node, allocs []*Allocation) (ok bool, reason string) {
	type inst struct {
		group   string
		healthy bool
		mem     int64
	}
	instances := map[string]inst{}
	if nr := n.NodeResources; nr != nil {
		for _, g := range nr.Devices {
			if g == nil {
				continue
			}
			mem := g.MemoryMiB()
			for _, in := range g.Instances {
				if in != nil {
					instances[in.ID] = inst{group: g.ID(), healthy: in.Healthy, mem: mem}
				}
			}
		}
	}
	sorted := make([]*Allocation, 0, len(allocs))
	for _, a := range allocs {
		if a != nil && a.HoldsResources() && a.AllocatedResources != nil {
			sorted = append(sorted, a)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	var cpu, mem int64
	whole := map[string]string{}
	shared := map[string]int64{}
	sharer := map[string]string{}
	ports := map[int]portHolder{}
	reserved := map[int]bool{}
	for _, p := range n.ReservedPorts() {
		reserved[p] = true
	}
	for _, a := range sorted {
		if sh := a.AllocatedResources.Shared; sh != nil {
			for _, pm := range sh.Ports {
				if a.CreateIndex == 0 && (pm.Value < 1 || pm.Value > MaxValidPort) {
					return false, fmt.Sprintf("port %q: host port %d is out of range", pm.Label, pm.Value)
				}
				if a.CreateIndex == 0 && reserved[pm.Value] {
					return false, fmt.Sprintf("port %q: host port %d is reserved on the node", pm.Label, pm.Value)
				}
				if prev, dup := ports[pm.Value]; dup {
					if prev.owner != "" {
						return false, fmt.Sprintf("port %d: endpoint %q of alloc %s collides with a port of alloc %s", pm.Value, prev.name, ShortID(prev.alloc), ShortID(a.ID))
					}
					return false, fmt.Sprintf("port %d: given to both alloc %s and alloc %s", pm.Value, ShortID(prev.alloc), ShortID(a.ID))
				}
				ports[pm.Value] = portHolder{alloc: a.ID}
			}
			if sh.Endpoint != nil {
				if why := claimEndpointPort(ports, reserved, a, sh.Endpoint); why != "" {
					return false, why
				}
			}
		}
		tasks := make([]string, 0, len(a.AllocatedResources.Tasks))
		for k := range a.AllocatedResources.Tasks {
			tasks = append(tasks, k)
		}
		sort.Strings(tasks)
		for _, task := range tasks {
			tr := a.AllocatedResources.Tasks[task]
			if tr == nil {
				continue
			}
			cpu += tr.CPU
			mem += tr.MemoryMB
			if n.IsUnified() {
				mem += tr.sharedMiB()
			}
			for _, d := range tr.Devices {
				if d == nil {
					continue
				}
				for _, id := range d.DeviceIDs {
					// A new allocation must name a healthy instance of
					// the group it names; one already placed keeps what
					// it holds even if the node's devices changed since.
					in, ok := instances[id]
					if a.CreateIndex == 0 {
						switch {
						case !ok:
							return false, fmt.Sprintf("device %s: no such instance on node", id)
						case in.group != d.ID():
							return false, fmt.Sprintf("device %s: belongs to %q, not %q", id, in.group, d.ID())
						case !in.healthy:
							return false, fmt.Sprintf("device %s: instance is unhealthy", id)
						}
					}
					if d.MemoryMB > 0 {
						if prev, dup := whole[id]; dup {
							return false, fmt.Sprintf("device %s: held whole by alloc %s, shared by alloc %s", id, ShortID(prev), ShortID(a.ID))
						}
						shared[id] += d.MemoryMB
						sharer[id] = a.ID
						if ok && shared[id] > in.mem {
							return false, fmt.Sprintf("device %s: memory shares of %d MiB exceed its %d MiB", id, shared[id], in.mem)
						}
						continue
					}
					if prev, dup := whole[id]; dup {
						return false, fmt.Sprintf("device %s: given to both alloc %s and alloc %s", id, ShortID(prev), ShortID(a.ID))
					}
					if prev, dup := sharer[id]; dup {
						return false, fmt.Sprintf("device %s: shared by alloc %s, held whole by alloc %s", id, ShortID(prev), ShortID(a.ID))
					}
					whole[id] = a.ID
				}
			}
		}
	}
	if c := n.HostCPUMHz(); cpu > c {
		return false, fmt.Sprintf("cpu: %d MHz needed, %d MHz available", cpu, c)
	}
	if m := n.HostMemoryMiB(); mem > m {
		return false, fmt.Sprintf("memory: %d MiB needed, %d MiB available", mem, m)
	}
	return true, ""
}
