package scheduler

import (
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestCapacityBoundaries (issue 11 item 14c) checks the scheduler's fit at
// the exact boundaries: CPU, memory, a GPU memory share next to another, and
// host memory with a share on a unified-memory node, exactly at what the
// node gives out fit; 1 MHz or 1 MiB more is refused by the scheduler itself
// (no plan is submitted for it, so the planner's own check is not what
// refuses). Capacities are written out from the node's declared resources.
func TestCapacityBoundaries(t *testing.T) {
	const (
		hostCPU = 32000 - 1000               // gpuNode: CPU less reserved, MHz
		hostMem = 256*1024 - 1024            // MiB
		gpuMem  = 81559                      // MiB
		uniMem  = 64 * 1024                  // unifiedNode total, MiB
		uniHost = uniMem - uniMem/4          // a quarter stays with the OS
		filler  = 40000                      // MiB share already held
		rest    = gpuMem - filler            // MiB left on that GPU
		uniTask = 1024                       // MiB of task memory on the unified node
		uniRest = uniHost - uniTask - filler // MiB of share left on the unified node
	)
	cases := []struct {
		name    string
		unified bool
		filler  bool // a share of filler MiB is already held on the GPU
		job     func(extra int) *structs.Job
		dim     string
	}{
		{"cpu", false, false, func(extra int) *structs.Job {
			return gpuJob("j", structs.JobTypeBatch, 1, 0, hostCPU+extra, 128)
		}, "cpu"},
		{"memory", false, false, func(extra int) *structs.Job {
			return gpuJob("j", structs.JobTypeBatch, 1, 0, 100, hostMem+extra)
		}, "memory"},
		{"gpu memory share", false, true, func(extra int) *structs.Job {
			return shareJob("j", 1, rest+extra, 128)
		}, dimDeviceMemory + "gpu"},
		{"unified host memory with a share", true, true, func(extra int) *structs.Job {
			return shareJob("j", 1, uniRest+extra, uniTask)
		}, "memory"},
	}
	for _, tc := range cases {
		for _, extra := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s +%d", tc.name, extra), func(t *testing.T) {
				h := newHarness(t)
				n := gpuNode("n", 1, h100, gpuMem)
				if tc.unified {
					n = unifiedNode("n", uniMem)
				}
				h.state.upsertNode(n)
				if tc.filler {
					h.register(shareJob("filler", 1, filler, 0))
					if len(h.state.liveAllocs("filler")) != 1 {
						t.Fatal("filler not placed")
					}
				}
				plans := len(h.planner.plans)
				ev := h.register(tc.job(extra))
				live := len(h.state.liveAllocs("j"))
				checkInvariants(t, h.state)
				if extra == 0 {
					if live != 1 {
						t.Fatalf("exactly at capacity: placed %d, want 1 (%+v)", live, ev.FailedTGAllocs["g"])
					}
					return
				}
				if live != 0 || len(h.planner.plans) != plans {
					t.Fatalf("1 over capacity: placed %d, submitted %d plans; the scheduler must refuse it", live, len(h.planner.plans)-plans)
				}
				if m := ev.FailedTGAllocs["g"]; m == nil || m.DimensionExhausted[tc.dim] != 1 {
					t.Fatalf("FailedTGAllocs %+v, want %q exhausted", m, tc.dim)
				}
			})
		}
	}
}
