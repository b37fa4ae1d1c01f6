package provision

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func lowGPU(node *structs.Node, pct float64) *structs.NodeDeviceStats {
	return &structs.NodeDeviceStats{NodeID: node.ID, Devices: []*structs.DeviceStats{{ID: "gpu0", Vendor: "nvidia", Type: "gpu", UtilizationPercent: pct}}}
}

// TestScaleInNeverTerminatesBatch: of two hosts idle by every other
// measure (GPUs at 0 % for long enough, past IdleAfter), the one running
// a batch allocation is never drained into termination nor terminated,
// even once it is ineligible; the other is drained first and terminated
// only after its drain ended. A node without device stats never meets a
// GPU rule.
func TestScaleInNeverTerminatesBatch(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 3)
	pool.Scaling.Idle = structs.PoolIdleRule{GPUUtilBelowPercent: 10, GPUUtilFor: 2 * time.Minute}
	pool.Scaling.IdleAfter = time.Minute
	h := newHarness(t, pool)
	if err := h.p.recordCreates(pool, scaleUp{count: 3, reason: "test: +3"}, h.clock()); err != nil {
		t.Fatal(err)
	}
	h.settle(ctx)
	reqs := h.requests("gpu")
	busy := h.joinNode("gpu", reqs[0].NodeName)
	idle := h.joinNode("gpu", reqs[1].NodeName)
	nostats := h.joinNode("gpu", reqs[2].NodeName)
	job := statetest.BatchJob(1)
	job.NodePool = "gpu"
	h.must(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
	a := statetest.Alloc(job, busy)
	a.ClientStatus = structs.AllocClientStatusRunning
	h.must(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}, Job: job})
	h.mu.Lock()
	h.stats[busy.ID] = lowGPU(busy, 0) // a batch job that waits on I/O: GPU idle
	h.stats[idle.ID] = lowGPU(idle, 3)
	h.mu.Unlock()
	for i := 0; i < 10; i++ {
		h.advance(30 * time.Second)
		h.step(ctx)
	}
	h.mu.Lock()
	drained := append([]string(nil), h.drained...)
	h.mu.Unlock()
	if len(drained) != 1 || drained[0] != idle.ID {
		t.Fatalf("drained %v, want only the idle node %s", drained, idle.ID)
	}
	// Drain not finished: nothing terminated yet.
	for _, r := range h.requests("gpu") {
		if r.Op == structs.ProvisionOpTerminate {
			t.Fatalf("terminate recorded before the drain ended: %+v", r)
		}
	}
	// The drainer finishes the idle node's drain; the busy node is made
	// ineligible as if drained too (its batch allocation still running).
	for _, n := range []*structs.Node{idle, busy} {
		cur, _ := h.fsm.State().NodeByID(nil, n.ID)
		c := cur.Copy()
		c.DrainStrategy = nil
		c.SchedulingEligibility = structs.NodeSchedulingIneligible
		h.must(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: c})
	}
	for i := 0; i < 6; i++ {
		h.advance(30 * time.Second)
		h.settle(ctx)
	}
	hosts := map[string]bool{}
	fp := h.provs["gpu"]
	fp.mu.Lock()
	for id := range fp.hosts {
		hosts[id] = true
	}
	fp.mu.Unlock()
	if !hosts[reqs[0].HostID] {
		t.Fatal("the host running a batch allocation was terminated")
	}
	if hosts[reqs[1].HostID] {
		t.Fatal("the idle, drained host was not terminated")
	}
	if !hosts[reqs[2].HostID] {
		t.Fatal("a node without device stats met the GPU idle rule")
	}
	var reason string
	for _, r := range h.requests("gpu") {
		if r.Op == structs.ProvisionOpTerminate {
			reason = r.Reason
			if r.HostID != reqs[1].HostID {
				t.Fatalf("terminate of %s", r.HostID)
			}
		}
	}
	if !strings.Contains(reason, "idle for") || !strings.Contains(reason, "GPUs below 10%") {
		t.Fatalf("terminate reason %q", reason)
	}
	_ = nostats
}

// TestScaleInKeepsMin: idle hosts are not removed below Min.
func TestScaleInKeepsMin(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 1, 2)
	h := newHarness(t, pool)
	if err := h.p.recordCreates(pool, scaleUp{count: 2, reason: "test: +2"}, h.clock()); err != nil {
		t.Fatal(err)
	}
	h.settle(ctx)
	for _, r := range h.requests("gpu") {
		h.joinNode("gpu", r.NodeName)
	}
	for i := 0; i < 10; i++ {
		h.advance(time.Minute)
		h.step(ctx)
	}
	h.mu.Lock()
	n := len(h.drained)
	h.mu.Unlock()
	if n != 1 {
		t.Fatalf("drained %d nodes of 2 with min 1", n)
	}
}
