package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

func TestTelemetrySimulatedGPUs(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.TelemetryInterval = 20 * time.Millisecond })
	ids := gpuIDs(c.Node())
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 60"}, ids[:1])
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	var st *structs.NodeDeviceStats
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		st = c.DeviceStats()
		return len(st.Devices) == 2 && st.Devices[0].AllocID != "" || len(st.Devices) == 2 && st.Devices[1].AllocID != "", fmt.Sprintf("stats %+v", st)
	})
	for _, d := range st.Devices {
		if !d.Simulated || d.MemoryTotalMiB != devices.SimulatedMemoryMiB || d.SampledAt == 0 {
			t.Errorf("device %s: %+v", d.ID, d)
		}
		switch d.ID {
		case ids[0]:
			if d.AllocID != a.ID || d.UtilizationPercent < 55 || d.UtilizationPercent > 95 || d.MemoryUsedMiB == 0 {
				t.Errorf("held GPU: %+v", d)
			}
		case ids[1]:
			if d.AllocID != "" || d.UtilizationPercent > 2 || d.MemoryUsedMiB != 0 {
				t.Errorf("free GPU: %+v", d)
			}
		}
	}
}

// TestHeartbeatCarriesGPUUsage: the client's heartbeats carry each GPU's
// latest utilisation and memory; a simulated GPU declared with an idle
// utilisation reports it while free.
func TestHeartbeatCarriesGPUUsage(t *testing.T) {
	srv := clienttest.NewServer()
	srv.SetHeartbeatTTL(100 * time.Millisecond)
	g := devices.Simulated("busy-node", 2)
	g.Attributes[devices.AttrSimulatedIdleUtilization] = structs.NewIntAttribute(87, "%")
	c := newTestClient(t, srv, "", func(cfg *Config) {
		cfg.TelemetryInterval = 20 * time.Millisecond
		cfg.DevGPUs = 0
		cfg.SimulatedDevices = []*structs.DeviceGroup{g}
	})
	id := c.Node().ID
	var got []*structs.GPUUsage
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		got = srv.LastGPUs(id)
		return len(got) == 2, fmt.Sprintf("GPU samples %+v", got)
	})
	for i, u := range got {
		if u.ID != g.Instances[i].ID || u.UtilizationPercent != 87 || u.Failed {
			t.Errorf("sample %d = %+v, want %s at 87 %%", i, u, g.Instances[i].ID)
		}
	}
}

// TestGPUUsageOf: the heartbeat's samples are the GPUs of a fresh sample
// only, bounded in count, with failed readings marked.
func TestGPUUsageOf(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	st := &structs.NodeDeviceStats{SampledAt: now.Add(-time.Second).UnixNano()}
	for i := 0; i < structs.MaxHeartbeatGPUs+5; i++ {
		st.Devices = append(st.Devices, &structs.DeviceStats{ID: fmt.Sprintf("GPU-%03d", i), Type: structs.DeviceTypeGPU, UtilizationPercent: 50, MemoryUsedMiB: 10})
	}
	st.Devices[1].Error = "nvml: gone"
	st.Devices = append([]*structs.DeviceStats{{ID: "fpga-0", Type: "fpga"}}, st.Devices...)
	got := gpuUsageOf(st, now, 3*time.Second)
	if len(got) != structs.MaxHeartbeatGPUs || got[0].ID != "GPU-000" || got[0].UtilizationPercent != 50 || got[0].MemoryUsedMiB != 10 || !got[1].Failed || got[2].Failed {
		t.Fatalf("samples: %d, first %+v %+v", len(got), got[0], got[1])
	}
	if err := structs.ValidateGPUUsage(got); err != nil {
		t.Fatal(err)
	}
	if got := gpuUsageOf(st, now.Add(time.Hour), 3*time.Second); got != nil {
		t.Fatalf("stale sample reported: %d", len(got))
	}
	if got := gpuUsageOf(&structs.NodeDeviceStats{}, now, time.Second); got != nil {
		t.Fatalf("before the first sample: %+v", got)
	}
}

func TestSimulatedUsageDeterministicAndVarying(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a := devices.SimulatedUsage("GPU-sim-a-0", true, -1, 1000, t0)
	if b := devices.SimulatedUsage("GPU-sim-a-0", true, -1, 1000, t0); a != b {
		t.Fatalf("same inputs differ: %+v %+v", a, b)
	}
	seen := map[float64]bool{}
	for s := 0; s < 60; s += 5 {
		u := devices.SimulatedUsage("GPU-sim-a-0", true, -1, 1000, t0.Add(time.Duration(s)*time.Second))
		if u.UtilizationPercent < 55 || u.UtilizationPercent > 95 {
			t.Fatalf("at +%ds: %v out of range", s, u.UtilizationPercent)
		}
		seen[u.UtilizationPercent] = true
	}
	if len(seen) < 6 {
		t.Fatalf("utilisation hardly varies over a minute: %v", seen)
	}
	if u := devices.SimulatedUsage("x", false, 64, 1000, t0); u.UtilizationPercent != 64 || u.MemoryUsedMiB != 0 {
		t.Errorf("free GPU with an idle utilisation: %+v", u)
	}
	if u := devices.SimulatedUsage("x", true, 3, 1000, t0); u.UtilizationPercent != 3 {
		t.Fatalf("override: %+v", u)
	}
}

func TestIdlePolicyStopsIdleAllocation(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.TelemetryInterval = 20 * time.Millisecond })
	ids := gpuIDs(c.Node())
	idle := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 60"}, ids[:1])
	idle.Job.Meta = map[string]string{
		structs.IdleStopUtilizationKey:    "10",
		structs.IdleStopAfterKey:          "1s",
		structs.SimulateGPUUtilizationKey: "2",
	}
	busy := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 60"}, ids[1:2])
	busy.Job.Meta = map[string]string{structs.IdleStopUtilizationKey: "10", structs.IdleStopAfterKey: "1s"}
	srv.UpsertAlloc(idle)
	srv.UpsertAlloc(busy)
	srv.WaitForAlloc(t, busy.ID, 15*time.Second, running)
	got := srv.WaitForAlloc(t, idle.ID, 15*time.Second, terminal)
	if got.ClientStatus != structs.AllocClientStatusComplete || eventOf(got, "main", TaskEventIdleGPU) == nil {
		t.Fatalf("idle alloc: status %q: %s", got.ClientStatus, clienttest.DescribeTaskStates(got.TaskStates))
	}
	// The busy one (simulated 55-95 %) started before the idle one
	// stopped, so it has had as long to go idle, and has not.
	if b := srv.Alloc(busy.ID); b.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("busy alloc: %q", b.ClientStatus)
	}
}

func TestIdlePolicyBadMeta(t *testing.T) {
	cases := []struct {
		meta map[string]string
		key  string
	}{
		{map[string]string{structs.IdleStopUtilizationKey: "5"}, structs.IdleStopAfterKey},
		{map[string]string{structs.IdleStopUtilizationKey: "abc", structs.IdleStopAfterKey: "1m"}, structs.IdleStopUtilizationKey},
		{map[string]string{structs.IdleStopUtilizationKey: "0", structs.IdleStopAfterKey: "1m"}, structs.IdleStopUtilizationKey},
		{map[string]string{structs.IdleStopUtilizationKey: "5", structs.IdleStopAfterKey: "10ms"}, structs.IdleStopAfterKey},
		{map[string]string{structs.IdleStopUtilizationKey: "5", structs.IdleStopAfterKey: "soon"}, structs.IdleStopAfterKey},
	}
	for _, tc := range cases {
		job := &structs.Job{Meta: tc.meta, TaskGroups: []*structs.TaskGroup{{Name: "g"}}}
		_, err := structs.IdlePolicyFor(job, "g")
		if !errors.Is(err, structs.ErrInvalid) || !containsStr(err.Error(), tc.key) {
			t.Errorf("meta %v: error %v, want ErrInvalid naming %s", tc.meta, err, tc.key)
		}
	}
	job := &structs.Job{Meta: map[string]string{structs.IdleStopUtilizationKey: "5", structs.IdleStopAfterKey: "1m"},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Meta: map[string]string{structs.IdleStopAfterKey: "2m"}}}}
	p, err := structs.IdlePolicyFor(job, "g")
	if err != nil || p.BelowPercent != 5 || p.After != 2*time.Minute {
		t.Fatalf("group overrides job: %+v %v", p, err)
	}
}

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
