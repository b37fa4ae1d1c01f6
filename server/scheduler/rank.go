package scheduler

import (
	"fmt"
	"math"

	"github.com/gpulayer/gpulayer/structs"
)

// Ranking. A node's score for one placement is the sum of three terms:
//
//   - bin-packing, in [0, 1]: Nomad's ScoreFitBinPack (nomad/structs/funcs.go,
//     used by scheduler/rank.go): 20 − (10^freeCPU + 10^freeMem), where free
//     is the fraction of the node's CPU and memory left after the placement,
//     divided by its maximum of 18. Fuller nodes score higher.
//   - GPU packing, in [−1, 1]: for a group that asks for devices, the
//     fraction of the node's healthy device instances in use after the
//     placement, so partly used nodes fill before whole free nodes (which
//     stay free for large jobs) and smaller nodes before larger ones; for a
//     group that asks for none, minus the fraction of the node's instances
//     that are free, so CPU-only work avoids idle GPU nodes.
//   - affinity, in [−1, 1]: the weights of the matched node affinities plus
//     those of the device affinities matched by the chosen device groups,
//     divided by the sum of the absolute weights of all of them (Nomad's
//     NodeAffinityIterator normalises the same way).
//
// The highest score wins; ties go to the lowest node ID, so the result is
// deterministic.

// binPackScore returns Nomad's ScoreFitBinPack for the utilisation after
// placement, normalised to [0, 1]. A capacity of zero or less counts as full.
func binPackScore(cpuUsed, cpuCap, memUsed, memCap int64) float64 {
	freeFrac := func(used, capacity int64) float64 {
		if capacity <= 0 {
			return 0
		}
		f := 1 - float64(used)/float64(capacity)
		return math.Max(0, math.Min(1, f))
	}
	total := math.Pow(10, freeFrac(cpuUsed, cpuCap)) + math.Pow(10, freeFrac(memUsed, memCap))
	score := 20 - total
	return math.Max(0, math.Min(18, score)) / 18
}

// fit reports whether one allocation of the group fits on the candidate
// with usage u, and its score. dim names the first exhausted dimension
// ("cpu", "memory", "devices: <request>", "device memory: <request>") when
// it does not fit. sc is scratch space (see pickDevices).
func fit(ask *groupAsk, cand *candidate, u *nodeUsage, sc *devScratch) (score float64, dim string) {
	if u.cpuUsed+ask.cpu > u.cpuCap {
		return 0, "cpu"
	}
	mem := ask.mem
	if u.unified {
		mem += ask.shareMiB
	}
	if u.memUsed+mem > u.memCap {
		return 0, "memory"
	}
	if !ask.ports.empty() {
		if dim := u.ports.fits(ask.ports); dim != "" {
			return 0, dim
		}
	}
	var devAff float64
	if len(ask.devices) > 0 {
		devAff, dim = pickDevices(ask, cand, u, sc, false)
		if dim != "" {
			return 0, dim
		}
	}
	score = binPackScore(u.cpuUsed+ask.cpu, u.cpuCap, u.memUsed+mem, u.memCap)
	if u.gpuCap > 0 {
		if ask.instances > 0 {
			score += float64(u.gpuCap-u.gpuFree+ask.instances) / float64(u.gpuCap)
		} else {
			score -= float64(u.gpuFree) / float64(u.gpuCap)
		}
	}
	if ask.affinityWeight > 0 {
		score += (cand.affinity + devAff) / ask.affinityWeight
	}
	return score, ""
}

// dimDeviceMemory prefixes the exhausted dimension of a memory share that
// fits no instance: "device memory: nvidia/gpu".
const dimDeviceMemory = "device memory: "

// assign takes the group's resources on the candidate's node and returns
// them per task. It must only be called after fit succeeded for the same
// usage; it picks the devices again with the same function (pickDevices),
// so it takes exactly what fit found room for. It returns an error, and
// takes nothing, only when the devices do not fit after all (a bug: fit
// was not called first).
func assign(ask *groupAsk, cand *candidate, u *nodeUsage, sc *devScratch) (*structs.AllocatedResources, error) {
	ar := &structs.AllocatedResources{Tasks: make(map[string]*structs.AllocatedTaskResources, len(ask.tg.Tasks))}
	for _, t := range ask.tg.Tasks {
		if t == nil {
			continue
		}
		tr := &structs.AllocatedTaskResources{}
		if t.Resources != nil {
			tr.CPU, tr.MemoryMB = int64(t.Resources.CPU), int64(t.Resources.MemoryMB)
		}
		ar.Tasks[t.Name] = tr
	}
	if len(ask.devices) > 0 {
		if _, dim := pickDevices(ask, cand, u, sc, true); dim != "" {
			return nil, fmt.Errorf("assign on node %s that does not fit (%s)", u.node.ID, dim)
		}
		applyPicks(ask, u, sc, ar)
	}
	u.cpuUsed += ask.cpu
	u.memUsed += ask.mem
	return ar, nil
}
