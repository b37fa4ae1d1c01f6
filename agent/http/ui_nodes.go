package http

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// The nodes page (/ui/nodes: every node, its state and GPUs) and the page
// of one node (/ui/node/{id}: attributes, drivers, GPUs with holders and
// telemetry, allocations, drain state).

// gpuHolder is an allocation holding (part of) a GPU.
type gpuHolder struct {
	AllocID, Short, JobID string
	ShareMiB              int64
}

type gpuRow struct {
	ID, Model, Health  string
	MemoryMiB          int64
	Healthy, Simulated bool
	HasTelemetry       bool
	Util               float64
	MemUsedMiB         int64
	Holders            []gpuHolder
	SharedMiB          int64
}

type nodeRow struct {
	ID, Short, Name, Status, Eligibility, Datacenter, Class, Drivers string
	// Drain says the node drains, in words ("draining, deadline
	// 2026-...", "draining, no deadline"); empty when it does not.
	Drain         string
	CPU, MemoryMB int64
	Allocs        int
	TelemetryAt   string
	GPUs          []gpuRow
}

type nodesView struct {
	pageBase
	Nodes              []nodeRow
	GPUCount, GPUsHeld int
}

// nodeUse is what the allocations say of the nodes: the holders of each
// device instance and the number of allocations per node that hold their
// resources (not finished on the client; a stopping allocation still
// holds its GPUs, as the plan applier counts it).
type nodeUse struct {
	holders map[string][]gpuHolder
	running map[string]int
}

func newNodeUse(allocs []*structs.Allocation) *nodeUse {
	nu := &nodeUse{holders: map[string][]gpuHolder{}, running: map[string]int{}}
	for _, a := range allocs {
		if !a.HoldsResources() {
			continue
		}
		nu.running[a.NodeID]++
		if a.AllocatedResources == nil {
			continue
		}
		for _, tr := range a.AllocatedResources.Tasks {
			if tr == nil {
				continue
			}
			for _, d := range tr.Devices {
				if d == nil {
					continue
				}
				for _, gid := range d.DeviceIDs {
					nu.holders[gid] = append(nu.holders[gid], gpuHolder{AllocID: a.ID, Short: shortID(a.ID), JobID: a.JobID, ShareMiB: d.MemoryMB})
				}
			}
		}
	}
	for _, hs := range nu.holders {
		sort.Slice(hs, func(i, j int) bool { return hs[i].AllocID < hs[j].AllocID })
	}
	return nu
}

// drainText says how a node drains, or "" when it does not.
func drainText(n *structs.Node) string {
	d := n.DrainStrategy
	if d == nil {
		return ""
	}
	switch {
	case d.Deadline < 0:
		return "draining, stopping everything now"
	case d.ForceDeadline > 0:
		return "draining, deadline " + fmtNanoTime(d.ForceDeadline)
	default:
		return "draining, no deadline (batch allocations run to completion)"
	}
}

// nodeRow gathers the list line of a node: its state, drivers and GPUs
// with their holders and, for this agent's own client, telemetry.
func (u *ui) nodeRow(n *structs.Node, nu *nodeUse) (nodeRow, int, int) {
	row := nodeRow{ID: n.ID, Short: shortID(n.ID), Name: n.Name, Status: n.Status, Eligibility: n.SchedulingEligibility,
		Datacenter: n.Datacenter, Class: n.NodeClass, Allocs: nu.running[n.ID], Drain: drainText(n)}
	if row.Eligibility == "" {
		row.Eligibility = structs.NodeSchedulingEligible
	}
	var drivers []string
	for name, d := range n.Drivers {
		if d != nil && d.Healthy {
			drivers = append(drivers, name)
		}
	}
	sort.Strings(drivers)
	row.Drivers = strings.Join(drivers, ", ")
	if row.Drivers == "" {
		row.Drivers = "none healthy"
	}
	var localID string
	var localAt int64
	if ds, ok := u.h.client.(deviceStatser); ok && u.h.client != nil {
		if st := ds.DeviceStats(); st != nil {
			localID, localAt = st.NodeID, st.SampledAt
		}
	}
	var stats map[string]*structs.DeviceStats
	if n.ID == localID && localAt != 0 {
		stats = u.localStats(n.ID)
		row.TelemetryAt = fmt.Sprintf("sampled %s ago", u.now().Sub(time.Unix(0, localAt)).Round(time.Second))
	}
	var count, held int
	if n.NodeResources != nil {
		row.CPU, row.MemoryMB = n.NodeResources.CPU, n.NodeResources.MemoryMB
		for _, g := range n.NodeResources.Devices {
			if g == nil {
				continue
			}
			var mem int64
			if m := g.Attributes["memory"]; m != nil && m.Int != nil {
				mem = *m.Int
			}
			sim := g.Attributes["simulated"] != nil && g.Attributes["simulated"].Bool != nil && *g.Attributes["simulated"].Bool
			for _, in := range g.Instances {
				if in == nil {
					continue
				}
				gr := gpuRow{ID: in.ID, Model: g.Name, Health: in.HealthDescription, MemoryMiB: mem, Healthy: in.Healthy,
					Simulated: sim, Holders: nu.holders[in.ID]}
				if gr.Health == "healthy" {
					gr.Health = ""
				}
				for _, h := range gr.Holders {
					gr.SharedMiB += h.ShareMiB
				}
				if s := stats[in.ID]; s != nil {
					gr.HasTelemetry, gr.Util, gr.MemUsedMiB = true, s.UtilizationPercent, s.MemoryUsedMiB
				}
				count++
				if len(gr.Holders) > 0 {
					held++
				}
				row.GPUs = append(row.GPUs, gr)
			}
		}
	}
	return row, count, held
}

func (u *ui) nodesPage(r *http.Request) (string, pageData, error) {
	q := &structs.QueryOptions{AllowStale: true}
	nodes, _, err := u.h.srv.NodeList(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	allocs, _, err := u.h.srv.AllocList(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	// Allocations of namespaces the caller may not read stay hidden.
	allocs = visible(r, allocs, structs.NamespaceCapabilityReadJob, allocNamespace)
	nu := newNodeUse(allocs)
	v := &nodesView{pageBase: pageBase{Nav: "nodes", StreamTopics: []string{structs.TopicNode, structs.TopicAllocation}, PollMillis: u.pollMillis()}}
	for _, n := range nodes {
		row, count, held := u.nodeRow(n, nu)
		v.GPUCount += count
		v.GPUsHeld += held
		v.Nodes = append(v.Nodes, row)
	}
	return "nodes", v, nil
}

// kv is a name and a value for a facts list.
type kv struct{ Key, Value string }

// driverRow is a driver's fingerprint on the node page.
type driverRow struct {
	Name              string
	Detected, Healthy bool
	Health            string
}

type nodeView struct {
	pageBase
	Node nodeRow
	// StatusDescription is why the node has its status, from the server.
	StatusDescription string
	HTTPAddr          string
	MemoryModel       string
	Availability      string
	Reserved          []string
	// ReservedCPU (MHz) and ReservedMemoryMB (MiB) are kept back for the
	// OS and the agent.
	ReservedCPU, ReservedMemoryMB int64
	Drivers                       []driverRow
	Attributes, Meta              []kv
	// Allocs are the node's allocations, newest first, finished ones
	// included.
	Allocs []allocRow
}

func sortedKV(m map[string]string) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// nodePage is /ui/node/{id}: one node's facts, drivers, GPUs with holders
// and telemetry, drain state and allocations. An unknown node is a 404.
func (u *ui) nodePage(r *http.Request) (string, pageData, error) {
	id := r.PathValue("id")
	q := &structs.QueryOptions{AllowStale: true}
	n, _, err := u.h.srv.NodeGet(r.Context(), id, q)
	if err != nil {
		return "", nil, err
	}
	allocs, _, err := u.h.srv.AllocList(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	// Allocations of namespaces the caller may not read stay hidden.
	allocs = visible(r, allocs, structs.NamespaceCapabilityReadJob, allocNamespace)
	var mine []*structs.Allocation
	for _, a := range allocs {
		if a.NodeID == n.ID {
			mine = append(mine, a)
		}
	}
	row, _, _ := u.nodeRow(n, newNodeUse(mine))
	v := &nodeView{
		pageBase: pageBase{Nav: "nodes", StreamTopics: []string{structs.TopicNode + ":" + n.ID, structs.TopicAllocation}, PollMillis: u.pollMillis()},
		Node:     row, StatusDescription: n.StatusDescription, HTTPAddr: n.HTTPAddr,
		MemoryModel: n.MemoryModel, Availability: n.Availability, Reserved: n.Reserved,
		Attributes: sortedKV(n.Attributes), Meta: sortedKV(n.Meta),
	}
	if v.MemoryModel == "" {
		v.MemoryModel = structs.MemoryModelDiscrete
	}
	if v.Availability == "" {
		v.Availability = structs.AvailabilityContinuous
	}
	if n.ReservedResources != nil {
		v.ReservedCPU, v.ReservedMemoryMB = n.ReservedResources.CPU, n.ReservedResources.MemoryMB
	}
	for name, d := range n.Drivers {
		if d == nil {
			continue
		}
		v.Drivers = append(v.Drivers, driverRow{Name: name, Detected: d.Detected, Healthy: d.Healthy, Health: d.HealthDescription})
	}
	sort.Slice(v.Drivers, func(i, j int) bool { return v.Drivers[i].Name < v.Drivers[j].Name })
	sort.Slice(mine, func(i, j int) bool { return mine[i].CreateIndex > mine[j].CreateIndex })
	restart := u.canRestart()
	for _, a := range mine {
		v.Allocs = append(v.Allocs, u.allocRow(a, restart))
	}
	return "node", v, nil
}
