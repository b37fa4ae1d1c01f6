package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

// injectXID injects xid on device id once sim runs (the client starts it
// after registering), failing the test after 10 s.
func injectXID(t *testing.T, sim *devices.SimulatedHealth, id string, xid uint64) {
	t.Helper()
	waittest.For(t, 10*time.Second, "health source running", func() (bool, string) {
		err := sim.InjectXID(id, xid)
		return err == nil, fmt.Sprint(err)
	})
}

// probe runs one probe round of sim.
func probe(t *testing.T, sim *devices.SimulatedHealth) {
	t.Helper()
	if err := sim.Probe(); err != nil {
		t.Fatal(err)
	}
}

// instance returns node n's device instance id, or nil.
func instance(n *structs.Node, id string) *structs.DeviceInstance {
	if n == nil {
		return nil
	}
	return findInstance(n, id)
}

// TestGPUHealthFakeServer: an XID on a GPU reaches the servers' copy of
// the node, the allocation running on it gets a "GPU Unhealthy" event and
// keeps running, telemetry shows the GPU unhealthy, and two quiet probes
// bring it back.
func TestGPUHealthFakeServer(t *testing.T) {
	srv := clienttest.NewServer()
	sim := devices.NewSimulatedHealth(0)
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.health = sim })
	ids := gpuIDs(c.Node())
	if len(ids) != 2 {
		t.Fatalf("GPUs %v, want 2 simulated", ids)
	}
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 300"}, ids[:1])
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)

	injectXID(t, sim, ids[0], 13)
	injectXID(t, sim, ids[0], 79)
	waittest.For(t, 10*time.Second, "server sees the GPU unhealthy", func() (bool, string) {
		in := instance(srv.Node(c.Node().ID), ids[0])
		return in != nil && !in.Healthy, fmt.Sprintf("%+v", in)
	})
	in := instance(srv.Node(c.Node().ID), ids[0])
	if !strings.HasPrefix(in.HealthDescription, "unhealthy: XID 79 (GPU has fallen off the bus) at ") {
		t.Fatalf("description %q", in.HealthDescription)
	}
	if other := instance(srv.Node(c.Node().ID), ids[1]); !other.Healthy {
		t.Fatalf("GPU %s marked too: %+v", ids[1], other)
	}
	got := srv.WaitForAlloc(t, a.ID, 10*time.Second, func(a *structs.Allocation) bool { return eventOf(a, "main", TaskEventGPUUnhealthy) != nil })
	if got.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("allocation on the unhealthy GPU is %s, want it left running", got.ClientStatus)
	}
	if e := eventOf(got, "main", TaskEventGPUUnhealthy); !strings.Contains(e.Message, ids[0]) || !strings.Contains(e.Message, "XID 79") {
		t.Fatalf("event message %q", e.Message)
	}
	c.sampleDevices(time.Now())
	for _, d := range c.DeviceStats().Devices {
		if d.Healthy != (d.ID != ids[0]) {
			t.Errorf("telemetry: %s healthy=%v", d.ID, d.Healthy)
		}
	}

	probe(t, sim)
	if in := instance(c.Node(), ids[0]); in.Healthy {
		t.Fatal("healthy at the first probe after the XID")
	}
	probe(t, sim)
	waittest.For(t, 10*time.Second, "server sees the GPU healthy again", func() (bool, string) {
		in := instance(srv.Node(c.Node().ID), ids[0])
		return in != nil && in.Healthy && in.HealthDescription == devices.HealthyDescription, fmt.Sprintf("%+v", in)
	})
}

// TestGPUHealthShutdownStopsSource: Shutdown returns only after the
// health source's Run has returned.
func TestGPUHealthShutdownStopsSource(t *testing.T) {
	srv := clienttest.NewServer()
	sim := devices.NewSimulatedHealth(time.Hour)
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.health = sim })
	waittest.For(t, 10*time.Second, "health source running", func() (bool, string) {
		err := sim.Probe()
		return err == nil, fmt.Sprint(err)
	})
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := sim.Probe(); !errors.Is(err, devices.ErrNotRunning) {
		t.Fatalf("health source still running after Shutdown: %v", err)
	}
}

// TestGPUHealthNoNVML: a client without NVML (this host) and no hook
// starts no monitor and registers as before.
func TestGPUHealthNoNVML(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.detectGPUs = nil; cfg.DevGPUs = 0 })
	if src, ids := c.healthSource(c.Node()); src != nil {
		t.Fatalf("health source %T for %v on a host without NVIDIA GPUs", src, ids)
	}
	if srv.Node(c.Node().ID) == nil {
		t.Fatal("node not registered")
	}
}

// TestHealthSourceSelection: NVML watches real NVIDIA GPUs only (not
// simulated ones, not those unreadable at detection), the test hook
// watches every instance, and tests that replace detection get no NVML.
func TestHealthSourceSelection(t *testing.T) {
	real := &structs.DeviceGroup{Vendor: structs.DeviceVendorNvidia, Type: structs.DeviceTypeGPU, Name: "NVIDIA H100 80GB HBM3",
		Instances: []*structs.DeviceInstance{{ID: "GPU-a", Healthy: true}, {ID: "GPU-b", Healthy: true}}}
	broken := &structs.DeviceGroup{Vendor: structs.DeviceVendorNvidia, Type: structs.DeviceTypeGPU, Name: devices.UnreadableName,
		Instances: []*structs.DeviceInstance{{ID: "GPU-index-2"}}}
	node := &structs.Node{NodeResources: &structs.NodeResources{Devices: []*structs.DeviceGroup{real, broken, devices.Simulated("node-1", 1)}}}
	_, nvmlErr := devices.NewNVMLHealth(devices.NVMLHealthConfig{})
	sim := devices.NewSimulatedHealth(0)
	cases := []struct {
		name     string
		cfg      Config
		wantNVML bool
		wantIDs  []string
	}{
		{"nvml watches real GPUs", Config{}, nvmlErr == nil, []string{"GPU-a", "GPU-b"}},
		{"hook watches all", Config{health: sim}, false, []string{"GPU-a", "GPU-b", "GPU-index-2", "GPU-sim-node-1-0"}},
		{"replaced detection", Config{detectGPUs: noGPUs}, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{cfg: &tc.cfg, logger: testLogger(t)}
			src, ids := c.healthSource(node)
			if tc.cfg.health != nil && src != devices.HealthSource(sim) {
				t.Fatalf("source %T, want the hook", src)
			}
			if tc.wantNVML && src == nil {
				t.Fatal("no NVML source in a cgo build")
			}
			if tc.cfg.health == nil && !tc.wantNVML {
				if src != nil {
					t.Fatalf("source %T, want none", src)
				}
				return
			}
			if strings.Join(ids, ",") != strings.Join(tc.wantIDs, ",") {
				t.Fatalf("watches %v, want %v", ids, tc.wantIDs)
			}
		})
	}
}

// gpuJob is a service job whose one task sleeps holding count GPUs; a
// batch job's task exits at once.
func gpuJob(id, jobType string, count int) *structs.Job {
	cmd := "exec sleep 300"
	if jobType == structs.JobTypeBatch {
		cmd = "true"
	}
	job := &structs.Job{
		ID: id, Name: id, Type: jobType, Datacenters: []string{"dc1"}, Priority: 50,
		TaskGroups: []*structs.TaskGroup{{
			Name: "train", Count: 1,
			Tasks: []*structs.Task{{
				Name: "main", Driver: "native", KillTimeout: time.Second,
				Config: map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", cmd}},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 32,
					Devices: []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: count}}},
			}},
		}},
	}
	job.Canonicalize()
	return job
}

// allocGPUs returns the sorted GPU IDs given to an allocation.
func allocGPUs(a *structs.Allocation) []string {
	var ids []string
	if a.AllocatedResources != nil {
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				ids = append(ids, d.DeviceIDs...)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// TestGPUHealthWithServer is issue 4's health check end to end, with a
// real in-process server and a client with 2 simulated GPUs: an XID on GPU
// 0 reaches the server's node (the re-registration keeps the node's
// eligibility); a job asking for 2 GPUs stays blocked, saying why; a job
// asking for 1 gets GPU 1; once GPU 0 is re-probed healthy the blocked
// job is placed on both.
func TestGPUHealthWithServer(t *testing.T) {
	srv := servertest.NewServer(t)
	sim := devices.NewSimulatedHealth(0)
	c := newTestClient(t, nil, "", func(cfg *Config) { cfg.Servers = srv; cfg.health = sim })
	ctx := context.Background()
	nodeID := c.Node().ID
	ids := gpuIDs(c.Node())
	sort.Strings(ids)
	if len(ids) != 2 {
		t.Fatalf("GPUs %v, want 2 simulated", ids)
	}
	node := func() *structs.Node {
		n, _, err := srv.NodeGet(ctx, nodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, err := srv.NodeUpdateEligibility(ctx, nodeID, structs.NodeSchedulingIneligible); err != nil {
		t.Fatal(err)
	}
	injectXID(t, sim, ids[0], 79)
	waittest.For(t, 10*time.Second, "server sees GPU 0 unhealthy", func() (bool, string) {
		in := instance(node(), ids[0])
		return in != nil && !in.Healthy, fmt.Sprintf("%+v", in)
	})
	if n := node(); n.SchedulingEligibility != structs.NodeSchedulingIneligible || n.Status != structs.NodeStatusReady {
		t.Fatalf("after re-registration: eligibility %q status %q; want ineligible, ready", n.SchedulingEligibility, n.Status)
	}
	if _, err := srv.NodeUpdateEligibility(ctx, nodeID, structs.NodeSchedulingEligible); err != nil {
		t.Fatal(err)
	}

	if _, err := srv.JobRegister(ctx, gpuJob("two", structs.JobTypeService, 2)); err != nil {
		t.Fatal(err)
	}
	var reason string
	waittest.For(t, 20*time.Second, "job two blocked", func() (bool, string) {
		evals, _, err := srv.JobEvaluations(ctx, "two", nil)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evals {
			if e.Status == structs.EvalStatusBlocked || len(e.FailedTGAllocs) > 0 {
				if m := e.FailedTGAllocs["train"]; m != nil {
					reason = fmt.Sprintf("%v %v", m.ConstraintFiltered, m.DimensionExhausted)
				}
				return reason != "", fmt.Sprintf("eval %s %s", e.ID, e.Status)
			}
		}
		return false, fmt.Sprintf("%d evals, none blocked", len(evals))
	})
	if !strings.Contains(reason, "devices") {
		t.Errorf("placement failure %q does not mention devices", reason)
	}
	t.Logf("job two blocked: %s", reason)

	if _, err := srv.JobRegister(ctx, gpuJob("one", structs.JobTypeBatch, 1)); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 20*time.Second, "job one completes on GPU 1", func() (bool, string) {
		allocs, _, err := srv.JobAllocations(ctx, "one", nil)
		if err != nil || len(allocs) != 1 {
			return false, fmt.Sprintf("%d allocs, %v", len(allocs), err)
		}
		if got := allocGPUs(allocs[0]); len(got) != 1 || got[0] != ids[1] {
			t.Fatalf("job one got GPUs %v, want [%s]", got, ids[1])
		}
		return allocs[0].ClientStatus == structs.AllocClientStatusComplete, allocs[0].ClientStatus
	})
	// Job one's end freed GPU 1 and unblocked job two, which must block
	// again on a snapshot that includes that end: only GPU 0's return can
	// place it now.
	allocs, _, err := srv.JobAllocations(ctx, "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	freed := allocs[0].ModifyIndex
	waittest.For(t, 20*time.Second, "job two blocked again after job one ended", func() (bool, string) {
		evals, _, err := srv.JobEvaluations(ctx, "two", nil)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evals {
			if e.Status == structs.EvalStatusBlocked && e.SnapshotIndex >= freed {
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s@%d", e.Status, e.SnapshotIndex))
		}
		return false, fmt.Sprintf("evals %v, want one blocked at index >= %d", seen, freed)
	})
	if allocs, _, _ := srv.JobAllocations(ctx, "two", nil); len(allocs) != 0 {
		t.Fatalf("job two placed while GPU 0 is unhealthy: %v", allocGPUs(allocs[0]))
	}

	probe(t, sim)
	probe(t, sim)
	waittest.For(t, 20*time.Second, "job two runs on both GPUs", func() (bool, string) {
		allocs, _, err := srv.JobAllocations(ctx, "two", nil)
		if err != nil || len(allocs) != 1 {
			return false, fmt.Sprintf("%d allocs, %v", len(allocs), err)
		}
		got := allocGPUs(allocs[0])
		return allocs[0].ClientStatus == structs.AllocClientStatusRunning && strings.Join(got, ",") == strings.Join(ids, ","),
			fmt.Sprintf("%s on %v", allocs[0].ClientStatus, got)
	})
	if in := instance(node(), ids[0]); !in.Healthy {
		t.Fatalf("GPU 0 on the server: %+v", in)
	}
}

var _ ServerConn = (*server.Server)(nil)
