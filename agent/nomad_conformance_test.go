package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/api/contexts"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/waittest"
)

// conformanceJobHCL is a service job asking for one GPU. The task prints
// a line, then keeps printing on SIGUSR1 and stays up until stopped.
const conformanceJobHCL = `
job "conform" {
  datacenters = ["dc1"]
  type        = "service"
  group "g" {
    count          = 1
    shutdown_delay = "100ms"
    task "t" {
      driver         = "native"
      shutdown_delay = "50ms"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got-usr1' USR1; echo hello-conformance; while true; do sleep 0.2; done"]
      }
      resources {
        cpu    = 100
        memory = 32
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

// conformanceRollingHCL is a service job under a rolling update with a
// canary and auto_revert, judged by task states.
const conformanceRollingHCL = `
job "conform-roll" {
  datacenters = ["dc1"]
  type        = "service"
  update {
    max_parallel      = 1
    canary            = 1
    health_check      = "task_states"
    min_healthy_time  = "1s"
    healthy_deadline  = "1m"
    progress_deadline = "2m"
    auto_revert       = true
  }
  group "g" {
    count = 1
    task "t" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo v0; while true; do sleep 0.2; done"]
      }
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
`

// TestNomadAPIConformance (issue 12, "Must show 1") drives a real
// in-process dev agent with HashiCorp's official Go API client
// (github.com/hashicorp/nomad/api, a test-only dependency) and checks, for
// each call, the fields a user of that client reads, not only that the
// call did not fail. The calls whose GPUlayer feature is not built yet are
// marked pending (t.Skip with "pending:").
func TestNomadAPIConformance(t *testing.T) {
	cfg := agent.DevConfig()
	cfg.Name = "conform-dev"
	a := startAgent(t, cfg)
	c, err := nomad.NewClient(&nomad.Config{Address: "http://" + a.HTTPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	// Logs, signal and exec reach the node's own agent, which is this one.
	nomad.ClientConnTimeout = 2 * time.Second

	step := func(name string, fn func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}

	step("Status", func(t *testing.T) {
		leader, err := c.Status().Leader()
		if err != nil || leader == "" {
			t.Fatalf("Leader() = %q, %v; want an address", leader, err)
		}
		peers, err := c.Status().Peers()
		if err != nil || len(peers) != 1 || peers[0] != leader {
			t.Fatalf("Peers() = %v, %v; want [%s]", peers, err, leader)
		}
	})

	var nodeID string
	step("Nodes", func(t *testing.T) {
		var stubs []*nomad.NodeListStub
		waittest.For(t, 30*time.Second, "the dev node ready", func() (bool, string) {
			var err error
			stubs, _, err = c.Nodes().List(nil)
			if err != nil {
				return false, err.Error()
			}
			return len(stubs) == 1 && stubs[0].Status == "ready", fmt.Sprintf("%d nodes", len(stubs))
		})
		s := stubs[0]
		if s.ID == "" || s.Name != "conform-dev" || s.Datacenter != "dc1" || s.NodePool != "default" ||
			s.SchedulingEligibility != "eligible" || len(s.Drivers) == 0 {
			t.Errorf("node stub: %+v", s)
		}
		nodeID = s.ID
		n, qm, err := c.Nodes().Info(nodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if qm.LastIndex == 0 || !qm.KnownLeader {
			t.Errorf("Info QueryMeta: %+v, want a LastIndex and KnownLeader", qm)
		}
		if n.Name != "conform-dev" || n.HTTPAddr == "" || n.Status != "ready" || n.NodePool != "default" {
			t.Errorf("node: name %q http %q status %q pool %q", n.Name, n.HTTPAddr, n.Status, n.NodePool)
		}
		if n.NodeResources == nil || n.NodeResources.Cpu.CpuShares <= 0 || n.NodeResources.Memory.MemoryMB <= 0 {
			t.Fatalf("node resources: %+v", n.NodeResources)
		}
		if len(n.NodeResources.Devices) != 1 {
			t.Fatalf("node devices: %+v", n.NodeResources.Devices)
		}
		d := n.NodeResources.Devices[0]
		if d.Vendor != "nvidia" || d.Type != "gpu" || d.Name == "" || len(d.Instances) != 2 {
			t.Fatalf("device group: %+v", d)
		}
		if mem := d.Attributes["memory"]; mem == nil || mem.IntVal == nil || *mem.IntVal <= 0 || mem.Unit != "MiB" {
			t.Errorf("device memory attribute: %+v", mem)
		}
		for _, in := range d.Instances {
			if !strings.HasPrefix(in.ID, "GPU-") || !in.Healthy {
				t.Errorf("device instance: %+v", in)
			}
		}
	})

	var job *nomad.Job
	step("Jobs.ParseHCL", func(t *testing.T) {
		var err error
		job, err = c.Jobs().ParseHCL(conformanceJobHCL, true)
		if err != nil {
			t.Fatal(err)
		}
		if *job.ID != "conform" || *job.Type != "service" || *job.Region != "global" || *job.Namespace != "default" ||
			len(job.TaskGroups) != 1 || *job.TaskGroups[0].Count != 1 {
			t.Fatalf("parsed job: id %v type %v region %v ns %v groups %d", job.ID, job.Type, job.Region, job.Namespace, len(job.TaskGroups))
		}
		res := job.TaskGroups[0].Tasks[0].Resources
		if *res.CPU != 100 || *res.MemoryMB != 32 || len(res.Devices) != 1 || res.Devices[0].Name != "nvidia/gpu" || *res.Devices[0].Count != 1 {
			t.Fatalf("parsed resources: %+v devices %+v", res, res.Devices)
		}
		if _, err := c.Jobs().ParseHCL("job \"x\" {\n  group \"g\" {\n    nope = 1\n  }\n}\n", false); err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("parse of a bad job: %v, want a 400", err)
		}
	})

	// A blocking list that starts before the registration must wake on it.
	listed := make(chan []*nomad.JobListStub, 1)
	listErr := make(chan error, 1)
	step("Jobs.List blocks", func(t *testing.T) {
		stubs, qm, err := c.Jobs().List(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(stubs) != 0 || qm.LastIndex == 0 {
			t.Fatalf("List before registering: %d jobs, LastIndex %d", len(stubs), qm.LastIndex)
		}
		idx := qm.LastIndex
		go func() {
			stubs, qm2, err := c.Jobs().List(&nomad.QueryOptions{WaitIndex: idx, WaitTime: 30 * time.Second})
			if err == nil && qm2.LastIndex <= idx {
				err = fmt.Errorf("woke with LastIndex %d, not past %d", qm2.LastIndex, idx)
			}
			listErr <- err
			listed <- stubs
		}()
		// The query must still be waiting: nothing changed yet.
		select {
		case err := <-listErr:
			t.Fatalf("blocking List answered before any change: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
	})

	var evalID string
	step("Jobs.Register", func(t *testing.T) {
		resp, wm, err := c.Jobs().Register(job, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.EvalID == "" || resp.JobModifyIndex == 0 || wm.LastIndex == 0 {
			t.Fatalf("register: %+v, LastIndex %d", resp, wm.LastIndex)
		}
		evalID = resp.EvalID
		select {
		case err := <-listErr:
			if err != nil {
				t.Fatal(err)
			}
			stubs := <-listed
			if len(stubs) != 1 || stubs[0].ID != "conform" {
				t.Fatalf("woken List: %+v", stubs)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the blocking List did not wake on the registration")
		}
	})

	// Must show 5: a field GPUlayer does not support, set, is a 400 that
	// names it, and nothing is registered.
	step("Jobs.Register refuses unsupported fields", func(t *testing.T) {
		bad, err := c.Jobs().ParseHCL(strings.Replace(conformanceJobHCL, `"conform"`, `"conform-spread"`, 1), true)
		if err != nil {
			t.Fatal(err)
		}
		bad.Spreads = []*nomad.Spread{{Attribute: "${node.datacenter}", Weight: new(int8(50))}}
		_, _, err = c.Jobs().Register(bad, nil)
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "Job.Spreads: not supported by GPUlayer") {
			t.Fatalf("register with Spreads: %v, want a 400 naming Job.Spreads", err)
		}
		bad.Spreads = nil
		bad.TaskGroups[0].Tasks[0].Lifecycle = &nomad.TaskLifecycle{Hook: "prestart"}
		_, _, err = c.Jobs().Register(bad, nil)
		if err == nil || !strings.Contains(err.Error(), "Job.TaskGroups[0].Tasks[0].Lifecycle: not supported") {
			t.Fatalf("register with a task lifecycle: %v, want a 400 naming it", err)
		}
		if _, _, err := c.Jobs().Info("conform-spread", nil); err == nil || !strings.Contains(err.Error(), "404") {
			t.Fatalf("a refused job exists: %v", err)
		}
	})

	step("Jobs.Info and List", func(t *testing.T) {
		j, qm, err := c.Jobs().Info("conform", nil)
		if err != nil {
			t.Fatal(err)
		}
		if qm.LastIndex == 0 || *j.ID != "conform" || *j.Region != "global" || *j.Namespace != "default" || *j.NodePool != "default" ||
			*j.Status == "" || *j.Version != 0 || len(j.TaskGroups) != 1 {
			t.Fatalf("job info: %+v", j)
		}
		if sd := j.TaskGroups[0].ShutdownDelay; sd == nil || *sd != 100*time.Millisecond || j.TaskGroups[0].Tasks[0].ShutdownDelay != 50*time.Millisecond {
			t.Errorf("job info shutdown_delay: group %v task %s, want 100ms and 50ms", sd, j.TaskGroups[0].Tasks[0].ShutdownDelay)
		}
		d := j.TaskGroups[0].Tasks[0].Resources.Devices
		if len(d) != 1 || d[0].Name != "nvidia/gpu" || *d[0].Count != 1 {
			t.Errorf("job info devices: %+v", d)
		}
		stubs, _, err := c.Jobs().List(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(stubs) != 1 || stubs[0].JobSummary == nil || stubs[0].JobSummary.Summary["g"] == (nomad.TaskGroupSummary{}) && stubs[0].Status == "" {
			t.Fatalf("job stubs: %+v", stubs)
		}
		if stubs[0].Type != "service" || stubs[0].Priority != 50 || stubs[0].Namespace != "default" {
			t.Errorf("job stub: %+v", stubs[0])
		}
	})

	var alloc *nomad.Allocation
	step("Jobs.Allocations", func(t *testing.T) {
		var stubs []*nomad.AllocationListStub
		waittest.For(t, 60*time.Second, "the allocation running", func() (bool, string) {
			var err error
			stubs, _, err = c.Jobs().Allocations("conform", false, nil)
			if err != nil {
				return false, err.Error()
			}
			if len(stubs) == 1 && stubs[0].ClientStatus == "failed" {
				t.Fatalf("allocation failed: %+v", stubs[0].TaskStates)
			}
			return len(stubs) == 1 && stubs[0].ClientStatus == "running", fmt.Sprintf("%d allocs", len(stubs))
		})
		s := stubs[0]
		if s.JobID != "conform" || s.TaskGroup != "g" || s.NodeID != nodeID || s.Name != "conform.g[0]" || s.DesiredStatus != "run" {
			t.Errorf("alloc stub: %+v", s)
		}
		ts := s.TaskStates["t"]
		if ts == nil || ts.State != "running" || ts.StartedAt.IsZero() || time.Since(ts.StartedAt) > time.Hour {
			t.Errorf("task state: %+v", ts)
		}
		var err error
		alloc, _, err = c.Allocations().Info(s.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
	})

	step("Allocations.Info", func(t *testing.T) {
		if alloc.Job == nil || *alloc.Job.ID != "conform" || alloc.NodeName != "conform-dev" {
			t.Errorf("alloc: job %v node %q", alloc.Job, alloc.NodeName)
		}
		tr := alloc.AllocatedResources.Tasks["t"]
		if tr == nil || tr.Cpu.CpuShares != 100 || tr.Memory.MemoryMB != 32 {
			t.Fatalf("allocated task resources: %+v", tr)
		}
		if len(tr.Devices) != 1 || tr.Devices[0].Vendor != "nvidia" || tr.Devices[0].Type != "gpu" ||
			len(tr.Devices[0].DeviceIDs) != 1 || !strings.HasPrefix(tr.Devices[0].DeviceIDs[0], "GPU-") {
			t.Errorf("allocated devices: %+v", tr.Devices)
		}
		ev := alloc.TaskStates["t"].Events
		if len(ev) == 0 || ev[0].Type == "" || ev[0].Time == 0 {
			t.Errorf("task events: %+v", ev)
		}
	})

	step("AllocFS.Logs follow", func(t *testing.T) {
		cancel := make(chan struct{})
		defer close(cancel)
		frames, errs := c.AllocFS().Logs(alloc, true, "t", "stdout", "start", 0, cancel, nil)
		var got bytes.Buffer
		deadline := time.After(20 * time.Second)
		for !strings.Contains(got.String(), "hello-conformance") {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("frames closed early; got %q", got.String())
				}
				got.Write(f.Data)
			case err := <-errs:
				t.Fatalf("logs: %v", err)
			case <-deadline:
				t.Fatalf("no hello-conformance in the followed log: %q", got.String())
			}
		}
	})

	step("Allocations.Signal", func(t *testing.T) {
		if err := c.Allocations().Signal(alloc, nil, "t", "SIGUSR1"); err != nil {
			t.Fatal(err)
		}
		waittest.For(t, 20*time.Second, "got-usr1 in the log", func() (bool, string) {
			cancel := make(chan struct{})
			defer close(cancel)
			frames, errs := c.AllocFS().Logs(alloc, false, "t", "stdout", "start", 0, cancel, nil)
			var got bytes.Buffer
			for {
				select {
				case f, ok := <-frames:
					if !ok {
						return strings.Contains(got.String(), "got-usr1"), got.String()
					}
					got.Write(f.Data)
				case err := <-errs:
					return false, err.Error()
				}
			}
		})
	})

	step("Allocations.Exec", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr syncBuffer
		code, err := c.Allocations().Exec(ctx, alloc, "t", false, []string{"/bin/sh", "-c", "read x; echo exec-$x; exit 3"},
			strings.NewReader("ok\n"), &stdout, &stderr, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if code != 3 || !strings.Contains(stdout.String(), "exec-ok") {
			t.Fatalf("exec: code %d stdout %q stderr %q", code, stdout.String(), stderr.String())
		}
	})

	step("Allocations.Restart", func(t *testing.T) {
		if err := c.Allocations().Restart(alloc, "t", nil); err != nil {
			t.Fatal(err)
		}
		waittest.For(t, 30*time.Second, "the task restarted", func() (bool, string) {
			a, _, err := c.Allocations().Info(alloc.ID, nil)
			if err != nil {
				return false, err.Error()
			}
			ts := a.TaskStates["t"]
			return ts != nil && ts.Restarts >= 1 && ts.State == "running" && !ts.LastRestart.IsZero(), fmt.Sprintf("%+v", ts)
		})
	})

	step("Jobs.Evaluations and Evaluations", func(t *testing.T) {
		evs, _, err := c.Jobs().Evaluations("conform", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			t.Fatal("no evaluations of the job")
		}
		all, qm, err := c.Evaluations().List(nil)
		if err != nil {
			t.Fatal(err)
		}
		if qm.LastIndex == 0 || len(all) < len(evs) {
			t.Fatalf("Evaluations().List: %d evals, LastIndex %d", len(all), qm.LastIndex)
		}
		e, _, err := c.Evaluations().Info(evalID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.ID != evalID || e.JobID != "conform" || e.Status != "complete" || e.Type != "service" ||
			e.TriggeredBy != "job-register" || e.Namespace != "default" || e.CreateTime == 0 {
			t.Errorf("evaluation: %+v", e)
		}
	})

	step("Jobs.Summary", func(t *testing.T) {
		s, _, err := c.Jobs().Summary("conform", nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.JobID != "conform" || s.Namespace != "default" || s.Summary["g"].Running != 1 {
			t.Fatalf("summary: %+v", s)
		}
	})

	step("Jobs.Versions", func(t *testing.T) {
		versions, diffs, qm, err := c.Jobs().Versions("conform", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		cur, _, err := c.Jobs().Info("conform", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(versions) == 0 || *versions[0].ID != "conform" || *versions[0].Version != *cur.Version || len(diffs) != len(versions)-1 || qm.LastIndex == 0 {
			t.Fatalf("versions: %d (first %v), diffs %d, LastIndex %d; current version %d", len(versions), versions[0].Version, len(diffs), qm.LastIndex, *cur.Version)
		}
		if versions[0].Stable == nil {
			t.Errorf("version without Stable")
		}
	})

	step("Jobs.Plan", func(t *testing.T) {
		j2, err := c.Jobs().ParseHCL(strings.Replace(conformanceJobHCL, "count          = 1\n", "count          = 2\n", 1), true)
		if err != nil {
			t.Fatal(err)
		}
		plan, _, err := c.Jobs().Plan(j2, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Annotations == nil || plan.Annotations.DesiredTGUpdates["g"] == nil || plan.Annotations.DesiredTGUpdates["g"].Place != 1 {
			t.Fatalf("plan annotations: %+v", plan.Annotations)
		}
		if plan.JobModifyIndex == 0 {
			t.Errorf("plan JobModifyIndex 0")
		}
	})

	step("Search and Regions", func(t *testing.T) {
		res, _, err := c.Search().PrefixSearch("conf", contexts.All, nil)
		if err != nil {
			t.Fatal(err)
		}
		if jobs := res.Matches[contexts.Jobs]; len(jobs) != 1 || jobs[0] != "conform" {
			t.Errorf("search jobs: %+v", res.Matches)
		}
		res, _, err = c.Search().PrefixSearch(alloc.ID[:6], contexts.Allocs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Matches[contexts.Allocs]; len(got) != 1 || got[0] != alloc.ID {
			t.Errorf("search allocs: %+v", res.Matches)
		}
		regions, err := c.Regions().List()
		if err != nil || len(regions) != 1 || regions[0] != "global" {
			t.Errorf("regions: %v %v", regions, err)
		}
		nss, _, err := c.Namespaces().List(nil)
		if err != nil || len(nss) != 1 || nss[0].Name != "default" {
			t.Errorf("namespaces: %+v %v", nss, err)
		}
	})

	step("Agent and Operator", func(t *testing.T) {
		self, err := c.Agent().Self()
		if err != nil {
			t.Fatal(err)
		}
		if self.Member.Name != "conform-dev" || self.Member.Status != "alive" || self.Member.Tags["region"] != "global" ||
			self.Stats["nomad"]["leader"] != "true" || self.Stats["raft"]["state"] != "Leader" || self.Stats["client"]["node_id"] != nodeID ||
			self.Config["Name"] != "conform-dev" {
			t.Errorf("agent self: member %+v stats %v config name %v", self.Member, self.Stats, self.Config["Name"])
		}
		m, err := c.Agent().Members()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Members) != 1 || m.Members[0].Status != "alive" || m.Members[0].Name != "conform-dev" || m.Members[0].Tags["role"] != "nomad" ||
			m.ServerRegion != "global" || m.ServerName != "conform-dev" || m.ServerDC != "dc1" {
			t.Errorf("members: %+v, first %+v", m, m.Members[0])
		}
		raw, err := c.Operator().Metrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		var ms nomad.MetricsSummary
		if err := json.Unmarshal(raw, &ms); err != nil {
			t.Fatalf("metrics summary %.200q: %v", raw, err)
		}
		found := false
		for _, g := range ms.Gauges {
			found = found || g.Name == "gpulayer_gpu_memory_total_mib" && g.Value > 0 && g.DisplayLabels["device"] != ""
		}
		if !found || len(ms.Samples) == 0 || ms.Timestamp == "" {
			t.Errorf("metrics summary: %d gauges (GPU memory found: %v), %d samples", len(ms.Gauges), found, len(ms.Samples))
		}
		prom, err := c.Operator().Metrics(&nomad.QueryOptions{Params: map[string]string{"format": "prometheus"}})
		if err != nil || !strings.Contains(string(prom), "# TYPE gpulayer_gpu_memory_total_mib gauge") {
			t.Errorf("prometheus metrics: %v %.200q", err, prom)
		}
		rc, err := c.Operator().RaftGetConfiguration(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rc.Servers) != 1 || !rc.Servers[0].Leader || !rc.Servers[0].Voter || rc.Servers[0].Address == "" {
			t.Errorf("raft configuration: %+v", rc.Servers)
		}
	})

	step("EventStream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		topics := map[nomad.Topic][]string{nomad.TopicJob: {"*"}, nomad.TopicAllocation: {"*"}, nomad.TopicEvaluation: {"*"}, nomad.TopicNode: {"*"}}
		ch, err := c.EventStream().Stream(ctx, topics, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[nomad.Topic]bool{}
		for len(seen) < 4 {
			select {
			case evs := <-ch:
				if evs.Err != nil {
					t.Fatal(evs.Err)
				}
				for _, e := range evs.Events {
					var err error
					switch e.Topic {
					case nomad.TopicJob:
						var j *nomad.Job
						if j, err = e.Job(); err == nil && (j == nil || *j.ID == "") {
							err = errors.New("no job in the payload")
						}
					case nomad.TopicAllocation:
						var a *nomad.Allocation
						if a, err = e.Allocation(); err == nil && (a == nil || a.ID == "" || a.JobID == "" || a.AllocatedResources == nil) {
							err = fmt.Errorf("no allocation with resources in the payload: %+v", a)
						}
					case nomad.TopicEvaluation:
						var ev *nomad.Evaluation
						if ev, err = e.Evaluation(); err == nil && (ev == nil || ev.ID == "") {
							err = errors.New("no evaluation in the payload")
						}
					case nomad.TopicNode:
						var n *nomad.Node
						if n, err = e.Node(); err == nil && (n == nil || n.ID == "" || n.NodeResources == nil || n.NodeResources.Cpu.CpuShares <= 0) {
							err = fmt.Errorf("no node with resources in the payload: %+v", n)
						}
					}
					if err != nil {
						t.Fatalf("%s event %s: %v", e.Topic, e.Type, err)
					}
					seen[e.Topic] = true
				}
			case <-ctx.Done():
				t.Fatalf("events seen: %v", seen)
			}
		}
	})

	step("Allocations.Stop", func(t *testing.T) {
		resp, err := c.Allocations().Stop(alloc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.EvalID == "" || resp.LastIndex == 0 {
			t.Fatalf("stop: %+v", resp)
		}
	})

	step("Jobs.Dispatch", func(t *testing.T) {
		pj := conformChildJob("param", "echo payload=$(cat local/input) model=$NOMAD_META_model")
		pj.ParameterizedJob = &nomad.ParameterizedJobConfig{Payload: "required", MetaRequired: []string{"model"}}
		pj.TaskGroups[0].Tasks[0].DispatchPayload = &nomad.DispatchPayloadConfig{File: "input"}
		if _, _, err := c.Jobs().Register(pj, nil); err != nil {
			t.Fatal(err)
		}
		q := &nomad.WriteOptions{IdempotencyToken: "conform-1"}
		resp, wm, err := c.Jobs().Dispatch("param", map[string]string{"model": "llama"}, []byte("hi"), "", q)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(resp.DispatchedJobID, "param/dispatch-") || resp.EvalID == "" || resp.JobCreateIndex == 0 || wm.LastIndex == 0 {
			t.Fatalf("dispatch: %+v (LastIndex %d)", resp, wm.LastIndex)
		}
		again, _, err := c.Jobs().Dispatch("param", map[string]string{"model": "llama"}, []byte("hi"), "", q)
		if err != nil || again.DispatchedJobID != resp.DispatchedJobID {
			t.Fatalf("dispatch with the same idempotency token: %+v, %v; want %s again", again, err, resp.DispatchedJobID)
		}
		child, _, err := c.Jobs().Info(resp.DispatchedJobID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if *child.ParentID != "param" || !child.Dispatched || child.Meta["model"] != "llama" || string(child.Payload) != "hi" {
			t.Errorf("dispatched child: parent %q dispatched %v meta %v payload %q", *child.ParentID, child.Dispatched, child.Meta, child.Payload)
		}
		waitComplete(t, c, resp.DispatchedJobID)
		if _, _, err := c.Jobs().Dispatch("param", nil, []byte("hi"), "", nil); err == nil || !strings.Contains(err.Error(), "model") {
			t.Errorf("dispatch without the required meta key: %v, want an error naming model", err)
		}
	})

	step("Jobs.PeriodicForce", func(t *testing.T) {
		pj := conformChildJob("nightly", "echo forced")
		// New Year's midnight: nothing launches on its own during the test.
		pj.Periodic = &nomad.PeriodicConfig{Enabled: pointer(true), Spec: pointer("0 0 1 1 *"), SpecType: pointer("cron"), ProhibitOverlap: pointer(true)}
		if _, _, err := c.Jobs().Register(pj, nil); err != nil {
			t.Fatal(err)
		}
		evalID, wm, err := c.Jobs().PeriodicForce("nightly", nil)
		if err != nil || evalID == "" || wm.LastIndex == 0 {
			t.Fatalf("PeriodicForce = %q, %+v, %v", evalID, wm, err)
		}
		stubs, _, err := c.Jobs().PrefixList("nightly/periodic-")
		if err != nil || len(stubs) != 1 || stubs[0].ParentID != "nightly" {
			t.Fatalf("children of nightly: %+v, %v; want one with ParentID nightly", stubs, err)
		}
		parent, _, err := c.Jobs().Info("nightly", nil)
		if err != nil || parent.Periodic == nil || *parent.Periodic.Spec != "0 0 1 1 *" || !*parent.Periodic.ProhibitOverlap {
			t.Fatalf("periodic parent read back: %+v, %v", parent.Periodic, err)
		}
		waitComplete(t, c, stubs[0].ID)
		waittest.For(t, 30*time.Second, "the parent's summary counting one dead child", func() (bool, string) {
			sum, _, err := c.Jobs().Summary("nightly", nil)
			if err != nil {
				return false, err.Error()
			}
			if sum.Children == nil {
				return false, "no Children in the summary"
			}
			return sum.Children.Dead == 1 && sum.Children.Running == 0 && sum.Children.Pending == 0, fmt.Sprintf("%+v", *sum.Children)
		})
	})
	step("Deployments", func(t *testing.T) {
		roll, err := c.Jobs().ParseHCL(conformanceRollingHCL, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Jobs().Register(roll, nil); err != nil {
			t.Fatal(err)
		}
		var d *nomad.Deployment
		waittest.For(t, 30*time.Second, "version 0's deployment successful", func() (bool, string) {
			d, _, err = c.Jobs().LatestDeployment("conform-roll", nil)
			if err != nil || d == nil {
				return false, fmt.Sprint(err)
			}
			return d.Status == "successful", d.Status + " " + d.StatusDescription
		})
		st := d.TaskGroups["g"]
		if d.JobID != "conform-roll" || d.JobVersion != 0 || st == nil || st.DesiredTotal != 1 || st.HealthyAllocs != 1 || st.RequireProgressBy.IsZero() {
			t.Fatalf("deployment: %+v, group %+v", d, st)
		}
		list, _, err := c.Deployments().List(nil)
		if err != nil || len(list) == 0 {
			t.Fatalf("Deployments().List: %d, %v", len(list), err)
		}
		info, _, err := c.Deployments().Info(d.ID, nil)
		if err != nil || info.ID != d.ID || info.Status != "successful" {
			t.Fatalf("Deployments().Info: %+v, %v", info, err)
		}
		allocs, _, err := c.Deployments().Allocations(d.ID, nil)
		if err != nil || len(allocs) != 1 || allocs[0].DeploymentStatus == nil || allocs[0].DeploymentStatus.Healthy == nil ||
			!*allocs[0].DeploymentStatus.Healthy || allocs[0].DeploymentStatus.Timestamp.IsZero() {
			t.Fatalf("Deployments().Allocations: %+v, %v", allocs, err)
		}
		vs, _, _, err := c.Jobs().Versions("conform-roll", false, nil)
		if err != nil || len(vs) != 1 || vs[0].Stable == nil || !*vs[0].Stable {
			t.Fatalf("version 0 not stable after its deployment: %v", err)
		}
		// Version 1 runs a canary beside version 0 and waits for its
		// promotion; failing it reverts to version 0.
		roll.TaskGroups[0].Tasks[0].Config["args"] = []interface{}{"-c", "echo v1; while true; do sleep 0.2; done"}
		if _, _, err := c.Jobs().Register(roll, nil); err != nil {
			t.Fatal(err)
		}
		waittest.For(t, 30*time.Second, "version 1's deployment with its canary", func() (bool, string) {
			d, _, err = c.Jobs().LatestDeployment("conform-roll", nil)
			if err != nil || d == nil {
				return false, fmt.Sprint(err)
			}
			g := d.TaskGroups["g"]
			return d.JobVersion == 1 && g != nil && g.DesiredCanaries == 1 && len(g.PlacedCanaries) == 1, d.Status + " " + d.StatusDescription
		})
		resp, wm, err := c.Deployments().Fail(d.ID, nil)
		if err != nil || resp.EvalID == "" || wm.LastIndex == 0 || resp.RevertedJobVersion == nil || *resp.RevertedJobVersion != 0 {
			t.Fatalf("Deployments().Fail: %+v, %v", resp, err)
		}
		deps, _, err := c.Jobs().Deployments("conform-roll", false, nil)
		if err != nil || len(deps) < 2 {
			t.Fatalf("Jobs().Deployments: %d, %v", len(deps), err)
		}
		failed, _, err := c.Deployments().Info(d.ID, nil)
		if err != nil || failed.Status != "failed" || !strings.Contains(failed.StatusDescription, "rolling back to job version 0") {
			t.Fatalf("failed deployment: %+v, %v", failed, err)
		}
		if _, _, err := c.Jobs().Deregister("conform-roll", true, nil); err != nil {
			t.Fatal(err)
		}
	})

	step("Jobs.Deregister", func(t *testing.T) {
		evID, wm, err := c.Jobs().Deregister("conform", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if evID == "" || wm.LastIndex == 0 {
			t.Fatalf("deregister: eval %q LastIndex %d", evID, wm.LastIndex)
		}
		j, _, err := c.Jobs().Info("conform", nil)
		if err != nil || !*j.Stop {
			t.Fatalf("job after deregister: %v %v", j, err)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the exec session's writer
// goroutine and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// conformChildJob is a one-task native batch job running script, for the dispatch
// and periodic steps.
func conformChildJob(id, script string) *nomad.Job {
	return &nomad.Job{
		ID: pointer(id), Name: pointer(id), Type: pointer("batch"), Datacenters: []string{"dc1"},
		TaskGroups: []*nomad.TaskGroup{{
			Name: pointer("g"), Count: pointer(1),
			Tasks: []*nomad.Task{{
				Name: "t", Driver: "native",
				Config:    map[string]any{"command": "/bin/sh", "args": []string{"-c", script}},
				Resources: &nomad.Resources{CPU: pointer(100), MemoryMB: pointer(32)},
			}},
		}},
	}
}

// waitComplete waits for the job's one allocation to complete.
func waitComplete(t *testing.T, c *nomad.Client, jobID string) {
	t.Helper()
	waittest.For(t, 60*time.Second, jobID+" complete", func() (bool, string) {
		allocs, _, err := c.Jobs().Allocations(jobID, false, nil)
		if err != nil {
			return false, err.Error()
		}
		if len(allocs) != 1 {
			return false, fmt.Sprintf("%d allocations", len(allocs))
		}
		if allocs[0].ClientStatus == "failed" {
			t.Fatalf("%s failed: %s", jobID, allocs[0].ClientDescription)
		}
		return allocs[0].ClientStatus == "complete", allocs[0].ClientStatus
	})
}

func pointer[T any](v T) *T { return &v }
