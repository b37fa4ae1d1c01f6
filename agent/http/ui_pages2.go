package http

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// gpuUse is one assigned GPU on the allocation page.
type gpuUse struct {
	Task, ID, Model         string
	ShareMiB                int64
	Simulated, HasTelemetry bool
	Util                    float64
	MemUsedMiB, MemTotalMiB int64
}

type taskEventRow struct {
	Time, Type, Message string
}

type taskStateRow struct {
	Name, Driver, State string
	Failed              bool
	Restarts            uint64
	CPU, MemoryMB       int
	Started, Finished   string
	Events              []taskEventRow
}

type allocView struct {
	pageBase
	Row                                   allocRow
	DesiredDescription, ClientDescription string
	GPUs                                  []gpuUse
	Tasks                                 []taskStateRow
	// RemoteStats is set when the allocation's node is not this agent's
	// client: the page reads its telemetry through /v1/client/stats.
	RemoteStats bool
}

// pollMillis is the local client's GPU sampling period in milliseconds
// (5000 without a client), so pages with telemetry re-read as often as it
// changes.
func (u *ui) pollMillis() int {
	if ds, ok := u.h.client.(deviceStatser); ok && u.h.client != nil {
		if st := ds.DeviceStats(); st != nil && st.IntervalSeconds > 0 {
			return int(st.IntervalSeconds * 1000)
		}
	}
	return 5000
}

// localStats returns the local client's telemetry when it is for nodeID.
func (u *ui) localStats(nodeID string) map[string]*structs.DeviceStats {
	ds, ok := u.h.client.(deviceStatser)
	if u.h.client == nil || !ok {
		return nil
	}
	st := ds.DeviceStats()
	if st == nil || st.NodeID != nodeID || st.SampledAt == 0 {
		return nil
	}
	out := make(map[string]*structs.DeviceStats, len(st.Devices))
	for _, d := range st.Devices {
		out[d.ID] = d
	}
	return out
}

func (u *ui) allocPage(r *http.Request) (string, pageData, error) {
	id := r.PathValue("id")
	a, _, err := u.h.srv.AllocGet(r.Context(), id, &structs.QueryOptions{AllowStale: true})
	if err != nil {
		return "", nil, err
	}
	v := &allocView{
		pageBase:           pageBase{Nav: "jobs", StreamTopics: []string{structs.TopicAllocation + ":" + a.ID}, PollMillis: u.pollMillis()},
		Row:                u.allocRow(a, u.canRestart()),
		DesiredDescription: a.DesiredDescription, ClientDescription: a.ClientDescription,
	}
	var tasks []*structs.Task
	if a.Job != nil {
		if tg := a.Job.LookupTaskGroup(a.TaskGroup); tg != nil {
			tasks = tg.Tasks
		}
	}
	// Tasks the job no longer lists but the client reported still show.
	known := map[string]bool{}
	for _, t := range tasks {
		if t != nil {
			known[t.Name] = true
		}
	}
	var extra []string
	for name := range a.TaskStates {
		if !known[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		tasks = append(tasks, &structs.Task{Name: name})
	}
	stats := u.localStats(a.NodeID)
	v.RemoteStats = stats == nil
	for _, t := range tasks {
		if t == nil {
			continue
		}
		row := taskStateRow{Name: t.Name, Driver: t.Driver, State: structs.TaskStatePending}
		if t.Resources != nil {
			row.CPU, row.MemoryMB = t.Resources.CPU, t.Resources.MemoryMB
		}
		if ts := a.TaskStates[t.Name]; ts != nil {
			row.State, row.Failed, row.Restarts = ts.State, ts.Failed, ts.Restarts
			row.Started, row.Finished = fmtNanoTimeOpt(ts.StartedAt), fmtNanoTimeOpt(ts.FinishedAt)
			for i := len(ts.Events) - 1; i >= 0; i-- {
				e := ts.Events[i]
				if e == nil {
					continue
				}
				msg := e.DisplayMessage
				if msg == "" {
					msg = e.Message
				}
				row.Events = append(row.Events, taskEventRow{Time: fmtNanoTime(e.Time), Type: e.Type, Message: msg})
			}
		}
		v.Tasks = append(v.Tasks, row)
		if a.AllocatedResources == nil || a.AllocatedResources.Tasks[t.Name] == nil {
			continue
		}
		for _, d := range a.AllocatedResources.Tasks[t.Name].Devices {
			if d == nil {
				continue
			}
			for _, gid := range d.DeviceIDs {
				g := gpuUse{Task: t.Name, ID: gid, Model: d.Name, ShareMiB: d.MemoryMB}
				if s := stats[gid]; s != nil {
					g.HasTelemetry, g.Simulated = true, s.Simulated
					g.Util, g.MemUsedMiB, g.MemTotalMiB = s.UtilizationPercent, s.MemoryUsedMiB, s.MemoryTotalMiB
				}
				v.GPUs = append(v.GPUs, g)
			}
		}
	}
	return "alloc", v, nil
}

func fmtNanoTimeOpt(ns int64) string {
	if ns == 0 {
		return ""
	}
	return fmtNanoTime(ns)
}

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
	// Allocations of namespaces the caller may not read stay hidden.
	allocs = visible(r, allocs, structs.NamespaceCapabilityReadJob, allocNamespace)
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

type peerRow struct {
	ID, Addr          string
	Leader, Voter     bool
	Gossip, GossipFor string
	Datacenter        string
	HTTPAddr          string
}

type statRow struct{ Key, Value string }

type serversView struct {
	pageBase
	Leader string
	Peers  []peerRow
	// LastContact says how long ago this server last heard from the
	// leader, in words.
	LastContact string
	Stats       []statRow
}

// serverStatKeys are the statistics the servers page shows, in order.
var serverStatKeys = []string{
	"server.name", "leader", "raft.state", "raft.term", "raft.last_contact", "raft.commit_index", "raft.applied_index",
	"raft.last_log_index", "raft.num_peers", "broker.total_ready", "broker.total_unacked", "blocked.total_blocked",
	"plan.queue_depth", "heartbeat.timers",
}

// raftMembers is what a multi-server build can say about its peers (the
// agent's *server.Server); the page falls back to Peers() without it.
type raftMembers interface {
	RaftPeers() ([]server.RaftPeer, error)
	Members() []server.Member
}

func (u *ui) serversPage(r *http.Request) (string, pageData, error) {
	v := &serversView{pageBase: pageBase{Nav: "servers", PollMillis: 5000}, Leader: u.h.srv.Leader()}
	stats := u.h.srv.Stats()
	switch lc := stats["raft.last_contact"]; {
	case stats["leader"] == "true":
		v.LastContact = "this server is the leader"
	case lc == "never" || lc == "":
		v.LastContact = "this server has never heard from a leader"
	default:
		v.LastContact = "this server last heard from the leader " + lc + " ago"
	}
	if rm, ok := u.h.srv.(raftMembers); ok {
		peers, err := rm.RaftPeers()
		if err != nil {
			return "", nil, err
		}
		members := map[string]server.Member{}
		for _, m := range rm.Members() {
			members[m.Name] = m
		}
		for _, p := range peers {
			row := peerRow{ID: p.ID, Addr: p.Address, Leader: p.Leader, Voter: p.Voter}
			if m, ok := members[p.ID]; ok {
				row.Gossip, row.Datacenter, row.HTTPAddr = m.Status, m.Datacenter, m.HTTPAddr
				if !m.StatusSince.IsZero() {
					row.GossipFor = u.now().Sub(m.StatusSince).Round(time.Second).String()
				}
			}
			v.Peers = append(v.Peers, row)
		}
	} else {
		for _, p := range u.h.srv.Peers() {
			v.Peers = append(v.Peers, peerRow{ID: p, Addr: p, Leader: p == v.Leader, Voter: true})
		}
	}
	for _, k := range serverStatKeys {
		if val, ok := stats[k]; ok {
			v.Stats = append(v.Stats, statRow{k, val})
		}
	}
	return "servers", v, nil
}

// exampleJob is the run page's starting text: the README's hello-gpu job.
const exampleJob = `job "hello-gpu" {
  type = "batch"

  group "hello" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"gpus: $CUDA_VISIBLE_DEVICES\""]
      }
      resources {
        cpu    = 100 # MHz
        memory = 64  # MiB
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

type runView struct {
	pageBase
	Example string
}

func (u *ui) runPage(r *http.Request) (string, pageData, error) {
	return "run", &runView{pageBase: pageBase{Nav: "run"}, Example: exampleJob}, nil
}
