package scheduler

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// This file is an oracle written apart from the scheduler and from
// structs.AllocsFit (which the fake planner and the plan applier use): it
// recomputes, from the allocations and the nodes' declared resources, what
// each node gives out, and checks that each task holds exactly the devices
// it asked for. It reads only plain fields; the arithmetic of reserved
// resources and the unified-memory OS reserve is written out again here
// from the docs (website/docs/scheduling.md), not called.

// oracleHostCPU is the node's CPU left for allocations, in MHz.
func oracleHostCPU(n *structs.Node) int64 {
	c := n.NodeResources.CPU
	if n.ReservedResources != nil {
		c -= n.ReservedResources.CPU
	}
	return c
}

// oracleHostMem is the node's memory left for allocations, in MiB: total
// less reserved; on a unified-memory node at least a quarter of the total,
// and at least 4096 MiB, stays with the OS.
func oracleHostMem(n *structs.Node) int64 {
	total := n.NodeResources.MemoryMB
	var reserve int64
	if n.ReservedResources != nil {
		reserve = n.ReservedResources.MemoryMB
	}
	if n.MemoryModel == structs.MemoryModelUnified {
		os := total / 4
		if os < 4096 {
			os = 4096
		}
		if os > reserve {
			reserve = os
		}
	}
	return total - reserve
}

// oracleGroupMem reads a device group's "memory" attribute in MiB.
func oracleGroupMem(g *structs.DeviceGroup) int64 {
	a := g.Attributes["memory"]
	if a == nil || a.Int == nil {
		return 0
	}
	if a.Unit == "GiB" {
		return *a.Int * 1024
	}
	return *a.Int
}

// oracleHolds reports whether an allocation counts against its node: its
// client has not reported it complete, failed or lost.
func oracleHolds(a *structs.Allocation) bool {
	switch a.ClientStatus {
	case structs.AllocClientStatusComplete, structs.AllocClientStatusFailed, structs.AllocClientStatusLost:
		return false
	}
	return true
}

// oracleNodeProblems returns what is wrong with the allocations held on node
// n: CPU or memory beyond what the node gives out, an instance held whole
// twice or both whole and shared, memory shares beyond the instance's
// memory, or an instance that is not the node's or not healthy.
func oracleNodeProblems(n *structs.Node, allocs []*structs.Allocation) []string {
	type inst struct {
		group   *structs.DeviceGroup
		healthy bool
	}
	insts := map[string]inst{}
	for _, g := range n.NodeResources.Devices {
		for _, in := range g.Instances {
			insts[in.ID] = inst{g, in.Healthy}
		}
	}
	var p []string
	var cpu, mem int64
	wholeBy := map[string][]string{}
	sharedMiB := map[string]int64{}
	portBy := map[int]string{}
	// endpointBy holds, per endpoint router port, the namespace, job
	// and group whose members share it.
	endpointBy := map[int]string{}
	for _, a := range allocs {
		if !oracleHolds(a) {
			continue
		}
		// Host ports: each held by one allocation; a dynamic one
		// (every port of these tests) within 20000-32000 unless the
		// node sets its range.
		if a.AllocatedResources.Shared != nil {
			lo, hi := 20000, 32000
			if n.NodeResources.MinDynamicPort > 0 {
				lo = n.NodeResources.MinDynamicPort
			}
			if n.NodeResources.MaxDynamicPort > 0 {
				hi = n.NodeResources.MaxDynamicPort
			}
			for _, pm := range a.AllocatedResources.Shared.Ports {
				if prev, dup := portBy[pm.Value]; dup {
					p = append(p, fmt.Sprintf("port %d held by %s and %s", pm.Value, prev, a.Name))
				}
				portBy[pm.Value] = a.Name
				if pm.Value < lo || pm.Value > hi {
					p = append(p, fmt.Sprintf("%s port %s=%d outside %d-%d", a.Name, pm.Label, pm.Value, lo, hi))
				}
			}
			if ep := a.AllocatedResources.Shared.Endpoint; ep != nil {
				owner := a.Namespace + "/" + a.JobID + "/" + a.TaskGroup
				if prev, dup := endpointBy[ep.Port]; dup && prev != owner {
					p = append(p, fmt.Sprintf("endpoint port %d held by %s and %s", ep.Port, prev, owner))
				}
				endpointBy[ep.Port] = owner
			}
		}
		for task, tr := range a.AllocatedResources.Tasks {
			cpu += tr.CPU
			mem += tr.MemoryMB
			for _, d := range tr.Devices {
				for _, id := range d.DeviceIDs {
					in, ok := insts[id]
					switch {
					case !ok:
						p = append(p, fmt.Sprintf("%s/%s holds %s, not an instance of node %s", a.Name, task, id, n.ID))
						continue
					case in.group.Vendor != d.Vendor || in.group.Type != d.Type || in.group.Name != d.Name:
						p = append(p, fmt.Sprintf("%s/%s names %s/%s/%s for %s of group %s", a.Name, task, d.Vendor, d.Type, d.Name, id, in.group.Name))
					case !in.healthy && a.CreateIndex == 0:
						p = append(p, fmt.Sprintf("%s/%s placed on unhealthy %s", a.Name, task, id))
					}
					if d.MemoryMB > 0 {
						sharedMiB[id] += d.MemoryMB
						if n.MemoryModel == structs.MemoryModelUnified {
							mem += d.MemoryMB
						}
						continue
					}
					wholeBy[id] = append(wholeBy[id], a.Name+"/"+task)
				}
			}
		}
	}
	for port, owner := range endpointBy {
		if holder, dup := portBy[port]; dup {
			p = append(p, fmt.Sprintf("endpoint port %d of %s is also a port of %s", port, owner, holder))
		}
	}
	if c := oracleHostCPU(n); cpu > c {
		p = append(p, fmt.Sprintf("cpu %d MHz > %d MHz", cpu, c))
	}
	if m := oracleHostMem(n); mem > m {
		p = append(p, fmt.Sprintf("memory %d MiB > %d MiB", mem, m))
	}
	for id, by := range wholeBy {
		if len(by) > 1 {
			p = append(p, fmt.Sprintf("%s held whole by %v", id, by))
		}
		if sharedMiB[id] > 0 {
			p = append(p, fmt.Sprintf("%s held whole by %v and shared", id, by))
		}
	}
	for id, mib := range sharedMiB {
		if in, ok := insts[id]; ok && mib > oracleGroupMem(in.group) {
			p = append(p, fmt.Sprintf("%s shares %d MiB > %d MiB", id, mib, oracleGroupMem(in.group)))
		}
	}
	sort.Strings(p)
	return p
}

// oracleDeviceMatches reports whether device group g of node n serves a
// request: its name ("type", "vendor/type" or "vendor/type/model") and each
// of its constraints. The constraints read ${device.model},
// ${device.vendor}, ${device.type} and ${device.attr.<name>}, with the
// operands =, !=, >, >=, <, <= (numbers compare as numbers, an attribute
// with a unit in that unit); that is all the tests use.
func oracleDeviceMatches(g *structs.DeviceGroup, req *structs.RequestedDevice) bool {
	parts := strings.Split(req.Name, "/")
	switch len(parts) {
	case 1:
		if g.Type != parts[0] {
			return false
		}
	case 2:
		if g.Vendor != parts[0] || g.Type != parts[1] {
			return false
		}
	case 3:
		if g.Vendor != parts[0] || g.Type != parts[1] || g.Name != parts[2] {
			return false
		}
	default:
		return false
	}
	for _, c := range req.Constraints {
		var l string
		switch {
		case c.LTarget == "${device.model}":
			l = g.Name
		case c.LTarget == "${device.vendor}":
			l = g.Vendor
		case c.LTarget == "${device.type}":
			l = g.Type
		case strings.HasPrefix(c.LTarget, "${device.attr."):
			a := g.Attributes[strings.TrimSuffix(strings.TrimPrefix(c.LTarget, "${device.attr."), "}")]
			if a == nil {
				return false
			}
			l = a.Text()
			if a.Int != nil {
				l = strconv.FormatInt(*a.Int, 10)
			}
		default:
			panic("oracle: constraint target not supported: " + c.LTarget)
		}
		ln, lerr := strconv.ParseFloat(l, 64)
		rn, rerr := strconv.ParseFloat(c.RTarget, 64)
		num := lerr == nil && rerr == nil
		var ok bool
		switch c.Operand {
		case "=", "==":
			ok = l == c.RTarget
		case "!=":
			ok = l != c.RTarget
		case ">":
			ok = num && ln > rn
		case ">=":
			ok = num && ln >= rn
		case "<":
			ok = num && ln < rn
		case "<=":
			ok = num && ln <= rn
		default:
			panic("oracle: operand not supported: " + c.Operand)
		}
		if !ok {
			return false
		}
	}
	return true
}

// oracleTaskDeviceProblems checks that every task of a placed allocation
// holds exactly what its device requests ask, in request order: a memory
// share request one instance with exactly its MiB; a whole request Count
// distinct instances, none shared, each of a group of the node that serves
// the request (which may be several groups when the constraints allow
// each); and nothing more.
func oracleTaskDeviceProblems(n *structs.Node, a *structs.Allocation) []string {
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	groupOf := map[string]*structs.DeviceGroup{}
	for _, g := range n.NodeResources.Devices {
		for _, in := range g.Instances {
			groupOf[in.ID] = g
		}
	}
	var p []string
	for _, t := range tg.Tasks {
		tr := a.AllocatedResources.Tasks[t.Name]
		if tr == nil {
			p = append(p, fmt.Sprintf("%s: task %s has no resources", a.Name, t.Name))
			continue
		}
		type held struct {
			id  string
			mib int64
		}
		var have []held
		for _, d := range tr.Devices {
			for _, id := range d.DeviceIDs {
				have = append(have, held{id, d.MemoryMB})
			}
		}
		seen := map[string]bool{}
		for _, h := range have {
			if h.mib == 0 && seen[h.id] {
				p = append(p, fmt.Sprintf("%s/%s: %s given twice", a.Name, t.Name, h.id))
			}
			seen[h.id] = true
		}
		k := 0
		var reqs []*structs.RequestedDevice
		if t.Resources != nil {
			reqs = t.Resources.Devices
		}
		for _, req := range reqs {
			if req.Count <= 0 {
				continue
			}
			want := req.Count
			if req.MemoryMB > 0 {
				want = 1
			}
			for i := 0; i < want; i++ {
				if k >= len(have) {
					p = append(p, fmt.Sprintf("%s/%s: request %s got %d of %d instances", a.Name, t.Name, req.Name, i, want))
					break
				}
				h := have[k]
				k++
				g := groupOf[h.id]
				switch {
				case g == nil:
					p = append(p, fmt.Sprintf("%s/%s: %s is not on node %s", a.Name, t.Name, h.id, n.ID))
				case !oracleDeviceMatches(g, req):
					p = append(p, fmt.Sprintf("%s/%s: request %s got %s of group %s, which does not serve it", a.Name, t.Name, req.Name, h.id, g.Name))
				case h.mib != int64(req.MemoryMB):
					p = append(p, fmt.Sprintf("%s/%s: request %s (share %d MiB) got %s with share %d MiB", a.Name, t.Name, req.Name, req.MemoryMB, h.id, h.mib))
				}
			}
		}
		if k < len(have) {
			p = append(p, fmt.Sprintf("%s/%s: holds %d device instances more than it asked for", a.Name, t.Name, len(have)-k))
		}
	}
	return p
}

// checkOracle fails the test when the oracle finds a node over-committed
// or a live allocation whose tasks do not hold exactly what they asked for.
func checkOracle(t testing.TB, s *fakeState) {
	t.Helper()
	for id, n := range s.nodes {
		if p := oracleNodeProblems(n, s.byNode[id]); len(p) > 0 {
			t.Fatalf("oracle: node %s: %s", id, strings.Join(p, "; "))
		}
		for _, a := range s.byNode[id] {
			if !oracleHolds(a) {
				continue
			}
			if p := oracleTaskDeviceProblems(n, a); len(p) > 0 {
				t.Fatalf("oracle: %s", strings.Join(p, "; "))
			}
		}
	}
	for id, list := range s.byNode {
		if s.nodes[id] == nil && len(list) > 0 {
			t.Fatalf("oracle: allocations on unknown node %s", id)
		}
	}
}
