package server

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestGPUUsageStats: a node's heartbeat samples count until its heartbeat
// deadline only; a GPU of the node without a sample, or one the client
// could not read, carries an Error (so a GPU idleness rule does not hold);
// a heartbeat without samples drops the node's.
func TestGPUUsageStats(t *testing.T) {
	node := &structs.Node{ID: "n1", NodeResources: &structs.NodeResources{Devices: []*structs.DeviceGroup{
		{Vendor: "nvidia", Type: structs.DeviceTypeGPU, Name: "A100", Instances: []*structs.DeviceInstance{{ID: "g0"}, {ID: "g1"}, {ID: "g2"}}},
		{Vendor: "x", Type: "fpga", Name: "f", Instances: []*structs.DeviceInstance{{ID: "f0"}}},
	}}}
	var u gpuUsage
	now := time.Unix(1_700_000_000, 0)
	u.record("n1", []*structs.GPUUsage{{ID: "g0", UtilizationPercent: 3, MemoryUsedMiB: 7}, {ID: "g1", Failed: true}, {ID: "other", UtilizationPercent: 1}}, now, 10*time.Second)
	st := u.stats(node, now.Add(5*time.Second))
	if st == nil || len(st.Devices) != 3 {
		t.Fatalf("stats %+v, want the node's 3 GPUs", st)
	}
	if d := st.Devices[0]; d.ID != "g0" || d.UtilizationPercent != 3 || d.MemoryUsedMiB != 7 || d.Error != "" || d.Type != structs.DeviceTypeGPU {
		t.Errorf("g0 = %+v", d)
	}
	if st.Devices[1].Error == "" || st.Devices[2].Error == "" {
		t.Errorf("unread or missing GPU without an error: %+v %+v", st.Devices[1], st.Devices[2])
	}
	if st := u.stats(node, now.Add(11*time.Second)); st != nil {
		t.Errorf("expired sample still counts: %+v", st)
	}
	u.record("n1", nil, now.Add(time.Second), 10*time.Second)
	if st := u.stats(node, now.Add(2*time.Second)); st != nil {
		t.Errorf("a heartbeat without samples kept the old ones: %+v", st)
	}
	// Expired entries of other nodes are pruned on a later heartbeat.
	u.record("n2", []*structs.GPUUsage{{ID: "g0"}}, now, time.Second)
	u.record("n3", []*structs.GPUUsage{{ID: "g0"}}, now.Add(2*gpuUsagePruneEvery), time.Second)
	u.mu.Lock()
	_, kept := u.byNode["n2"]
	u.mu.Unlock()
	if kept {
		t.Error("expired sample of n2 not pruned")
	}
}
