package client

import (
	"maps"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestSchedulingEnv(t *testing.T) {
	gpu := func(mib int64, ids ...string) *structs.AllocatedDeviceResource {
		return &structs.AllocatedDeviceResource{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: ids, MemoryMB: mib}
	}
	cases := []struct {
		name  string
		gang  *structs.GangInfo
		res   *structs.AllocatedTaskResources
		want  map[string]string
		unset []string
	}{
		{"whole gpus, no gang", nil, &structs.AllocatedTaskResources{Devices: []*structs.AllocatedDeviceResource{gpu(0, "GPU-a", "GPU-b")}},
			map[string]string{}, []string{"GPULAYER_GPU_MEMORY_MB", "RANK", "MASTER_ADDR"}},
		{"memory share", nil, &structs.AllocatedTaskResources{Devices: []*structs.AllocatedDeviceResource{gpu(20480, "GPU-a")}},
			map[string]string{"GPULAYER_GPU_MEMORY_MB": "20480"}, []string{"RANK"}},
		{"no resources", nil, nil, map[string]string{}, []string{"GPULAYER_GPU_MEMORY_MB"}},
		{"gang member", &structs.GangInfo{Rank: 1, WorldSize: 2, LocalRank: 0, MasterAddr: "10.0.0.1", MasterPort: 29731, Peers: []string{"10.0.0.1", "10.0.0.2"}, Attempt: 2},
			&structs.AllocatedTaskResources{},
			map[string]string{
				"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29731",
				"GPULAYER_RANK": "1", "GPULAYER_WORLD_SIZE": "2", "GPULAYER_LOCAL_RANK": "0", "GPULAYER_MASTER_ADDR": "10.0.0.1",
				"GPULAYER_MASTER_PORT": "29731", "GPULAYER_GANG_PEERS": "10.0.0.1,10.0.0.2", "GPULAYER_GANG_ATTEMPT": "2",
			}, []string{"GPULAYER_GPU_MEMORY_MB"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"RANK": "user value", "KEEP": "x"}
			if tc.gang == nil {
				delete(env, "RANK")
			}
			schedulingEnv(env, &structs.Allocation{ID: "a", Gang: tc.gang}, tc.res)
			want := maps.Clone(tc.want)
			want["KEEP"] = "x"
			for k, v := range want {
				if env[k] != v {
					t.Fatalf("%s = %q, want %q (env %v)", k, env[k], v, env)
				}
			}
			for _, k := range tc.unset {
				if _, ok := env[k]; ok {
					t.Fatalf("%s set to %q, want unset", k, env[k])
				}
			}
		})
	}
}

// TestBugClassGPUCountInEnv: the GPU count a task sees in its env is what
// it asked for, not the host's: a task holding 1 of a node's 8 GPUs sees
// one device, a task holding a memory share sees its one GPU and its
// share, and a task with none sees none.
func TestBugClassGPUCountInEnv(t *testing.T) {
	gpu := func(mib int64, ids ...string) []*structs.AllocatedDeviceResource {
		return []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: ids, MemoryMB: mib}}
	}
	cases := []struct {
		name                string
		devices             []*structs.AllocatedDeviceResource
		count, visible, mem string
	}{
		{"one of eight", gpu(0, "GPU-3"), "1", "GPU-3", ""},
		{"two of eight", gpu(0, "GPU-3", "GPU-5"), "2", "GPU-3,GPU-5", ""},
		{"memory share", gpu(4096, "GPU-1"), "1", "GPU-1", "4096"},
		{"no gpu", nil, "0", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &structs.Allocation{ID: "a1", Name: "j.g[0]", JobID: "j", TaskGroup: "g",
				AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
					"t": {CPU: 100, MemoryMB: 64, Devices: tc.devices},
				}}}
			tr := newTaskRunner(taskRunnerConfig{Alloc: a, AllocDir: t.TempDir(), JobName: "j", Task: &structs.Task{Name: "t"}})
			env := tr.env()
			if env["GPULAYER_GPU_COUNT"] != tc.count || env["CUDA_VISIBLE_DEVICES"] != tc.visible || env["GPULAYER_GPU_MEMORY_MB"] != tc.mem {
				t.Fatalf("count %q visible %q memory %q; want %q %q %q", env["GPULAYER_GPU_COUNT"], env["CUDA_VISIBLE_DEVICES"], env["GPULAYER_GPU_MEMORY_MB"], tc.count, tc.visible, tc.mem)
			}
		})
	}
}
