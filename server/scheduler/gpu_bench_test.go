package scheduler

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// benchModels are the GPU models of the simulated fleet, one per node in
// turn: name and memory in MiB.
var benchModels = []struct {
	name string
	mem  int64
}{{h100, 81559}, {"NVIDIA A100-SXM4-40GB", 40960}, {"NVIDIA L4", 23034}, {a10, 24576}}

// benchFleet adds n nodes of 8 GPUs each, the models taking turns, with
// 128 cores (256,000 MHz) and 1 TiB of memory.
func benchFleet(h *harness, n int) {
	for i := 0; i < n; i++ {
		m := benchModels[i%len(benchModels)]
		node := gpuNode(fmt.Sprintf("node-%05d", i), 8, m.name, m.mem)
		node.NodeResources.CPU, node.NodeResources.MemoryMB = 256000, 1024*1024
		h.state.upsertNode(node)
	}
}

// heapMiB returns the heap in use after a collection, in MiB.
func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// BenchmarkPlace100kOn10kNodes places 100,000 allocations on 10,000
// simulated nodes of 8 GPUs (H100, A100 40GB, L4 and A10 in turn; 80,000
// GPUs) through the full Process path against the in-memory fake state and
// planner: 1,000 batch jobs of 100 allocations, six in ten asking for one
// whole GPU and four in ten for an 8 GiB memory share, each 1,000 MHz and
// 4 GiB. Every allocation fits. It reports placements per second of wall
// time and the heap in use once all are placed (fake state included);
// -benchmem gives the scheduler's allocations per run.
func BenchmarkPlace100kOn10kNodes(b *testing.B) {
	b.ReportAllocs()
	placed := 0
	var heap float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := newHarness(b)
		benchFleet(h, 10000)
		jobs := make([]*structs.Job, 1000)
		for j := range jobs {
			job := gpuJob(fmt.Sprintf("job-%04d", j), structs.JobTypeBatch, 100, 1, 1000, 4096)
			if j%10 >= 6 {
				job.TaskGroups[0].Tasks[0].Resources.Devices[0].MemoryMB = 8192
			}
			jobs[j] = h.state.upsertJob(job)
		}
		runtime.GC()
		b.StartTimer()
		for _, j := range jobs {
			h.process(newEval(j, structs.EvalTriggerJobRegister))
		}
		b.StopTimer()
		if n := len(h.state.allocs); n != 100000 {
			b.Fatalf("placed %d allocations, want 100000", n)
		}
		placed += len(h.state.allocs)
		heap = heapMiB()
		checkInvariants(b, h.state)
		b.StartTimer()
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
	b.ReportMetric(heap, "heap-MiB")
}

// BenchmarkGang64x8On10kNodes places one gang of 64 members, each asking
// for 8 whole GPUs of any model (a whole node), on the 10,000-node fleet of
// BenchmarkPlace100kOn10kNodes, empty and after 5,000 single-GPU
// allocations were placed (bin-packed onto some 625 nodes). It reports the time to place the
// gang (ns/op) and checks all 64 members are placed on distinct nodes.
func BenchmarkGang64x8On10kNodes(b *testing.B) {
	for _, busy := range []bool{false, true} {
		name := "empty"
		if busy {
			name = "after_5000_allocs"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := newHarness(b)
				benchFleet(h, 10000)
				if busy {
					filler := h.state.upsertJob(gpuJob("filler", structs.JobTypeBatch, 5000, 1, 1000, 4096))
					h.process(newEval(filler, structs.EvalTriggerJobRegister))
				}
				job := gpuJob("gang", structs.JobTypeBatch, 64, 8, 1000, 4096)
				job.TaskGroups[0].Gang = true
				job = h.state.upsertJob(job)
				b.StartTimer()
				ev := h.process(newEval(job, structs.EvalTriggerJobRegister))
				b.StopTimer()
				live := h.state.liveAllocs("gang")
				nodes := map[string]bool{}
				for _, a := range live {
					nodes[a.NodeID] = true
				}
				if len(live) != 64 || len(nodes) != 64 || ev.QueuedAllocations["g"] != 0 {
					b.Fatalf("gang: %d members on %d nodes, queued %v", len(live), len(nodes), ev.QueuedAllocations)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkNomadShapedService follows the shape of Nomad's
// BenchmarkServiceScheduler (scheduler/benchmarks/benchmarks_test.go in
// hashicorp/nomad): one service job of 1,200 allocations of 6,000 MHz and
// 6,000 MiB on 5,000 and on 10,000 nodes of 32,000 MiB, spread over 25
// racks (meta.rack = "r<i mod 25>") and two datacenters, here constrained
// to half the racks (r0 to r11, by a regexp on ${meta.rack}). Nodes have
// 32,000 MHz so memory binds (5 allocations a node). It reports
// placements per second of wall time.
func BenchmarkNomadShapedService(b *testing.B) {
	for _, size := range []int{5000, 10000} {
		b.Run(fmt.Sprintf("%d_nodes", size), func(b *testing.B) {
			b.ReportAllocs()
			placed := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := newHarness(b)
				for n := 0; n < size; n++ {
					node := gpuNode(fmt.Sprintf("node-%05d", n), 0, "", 0)
					node.Datacenter = []string{"dc-1", "dc-2"}[n%2]
					node.Meta["rack"] = fmt.Sprintf("r%d", n%25)
					node.NodeResources.CPU, node.NodeResources.MemoryMB = 32000, 32000
					node.ReservedResources = nil
					h.state.upsertNode(node)
				}
				job := gpuJob("service", structs.JobTypeService, 1200, 0, 6000, 6000)
				job.Datacenters = []string{"dc-1", "dc-2"}
				job.Constraints = []*structs.Constraint{{LTarget: "${meta.rack}", Operand: "regexp", RTarget: "^r([0-9]|1[01])$"}}
				job = h.state.upsertJob(job)
				b.StartTimer()
				ev := h.process(newEval(job, structs.EvalTriggerJobRegister))
				b.StopTimer()
				live := h.state.liveAllocs("service")
				if len(live) != 1200 || ev.QueuedAllocations["g"] != 0 {
					b.Fatalf("placed %d, queued %v", len(live), ev.QueuedAllocations)
				}
				for _, a := range live {
					var rack int
					if _, err := fmt.Sscanf(h.state.nodes[a.NodeID].Meta["rack"], "r%d", &rack); err != nil || rack > 11 {
						b.Fatalf("alloc on rack %q, outside r0-r11", h.state.nodes[a.NodeID].Meta["rack"])
					}
				}
				placed += len(live)
				b.StartTimer()
			}
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}
