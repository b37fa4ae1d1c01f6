package http

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

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
	CPU, MemoryMB                                                    int64
	Allocs                                                           int
	TelemetryAt                                                      string
	GPUs                                                             []gpuRow
}

type nodesView struct {
	pageBase
	Nodes              []nodeRow
	GPUCount, GPUsHeld int
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
	// Holders of each device instance, from allocations still meant to
	// run and not finished on the client.
	holders := map[string][]gpuHolder{}
	running := map[string]int{}
	for _, a := range allocs {
		if a.TerminalStatus() || a.ClientTerminalStatus() {
			continue
		}
		running[a.NodeID]++
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
					holders[gid] = append(holders[gid], gpuHolder{AllocID: a.ID, Short: shortID(a.ID), JobID: a.JobID, ShareMiB: d.MemoryMB})
				}
			}
		}
	}
	v := &nodesView{pageBase: pageBase{Nav: "nodes", StreamTopics: []string{structs.TopicNode, structs.TopicAllocation}, PollMillis: u.pollMillis()}}
	var localID string
	var localAt int64
	if ds, ok := u.h.client.(deviceStatser); ok && u.h.client != nil {
		if st := ds.DeviceStats(); st != nil {
			localID, localAt = st.NodeID, st.SampledAt
		}
	}
	for _, n := range nodes {
		row := nodeRow{ID: n.ID, Short: shortID(n.ID), Name: n.Name, Status: n.Status, Eligibility: n.SchedulingEligibility,
			Datacenter: n.Datacenter, Class: n.NodeClass, Allocs: running[n.ID]}
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
		var stats map[string]*structs.DeviceStats
		if n.ID == localID && localAt != 0 {
			stats = u.localStats(n.ID)
			row.TelemetryAt = fmt.Sprintf("sampled %s ago", u.now().Sub(time.Unix(0, localAt)).Round(time.Second))
		}
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
						Simulated: sim, Holders: holders[in.ID]}
					if gr.Health == "healthy" {
						gr.Health = ""
					}
					for _, h := range gr.Holders {
						gr.SharedMiB += h.ShareMiB
					}
					if s := stats[in.ID]; s != nil {
						gr.HasTelemetry, gr.Util, gr.MemUsedMiB = true, s.UtilizationPercent, s.MemoryUsedMiB
					}
					v.GPUCount++
					if len(gr.Holders) > 0 {
						v.GPUsHeld++
					}
					row.GPUs = append(row.GPUs, gr)
				}
			}
		}
		v.Nodes = append(v.Nodes, row)
	}
	return "nodes", v, nil
}
