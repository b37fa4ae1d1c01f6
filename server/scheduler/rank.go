package scheduler

import (
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
// ("cpu", "memory", "devices: <request>") when it does not fit. taken is
// scratch space, one entry per node device group.
func fit(ask *groupAsk, cand *candidate, u *nodeUsage, taken []int) (score float64, dim string) {
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
	var devAff float64
	if len(ask.devices) > 0 {
		clear(taken)
		var extra map[int][]int64
		for i, da := range ask.devices {
			if da.share > 0 {
				ch, _, ok := pickShare(cand.choices[i], u, taken, &extra, da.share)
				if !ok {
					return 0, dimDeviceMemory + da.req.Name
				}
				devAff += ch.affinity
				continue
			}
			ch, ok := pickGroup(cand.choices[i], u, taken, da.req.Count)
			if !ok {
				return 0, "devices: " + da.req.Name
			}
			taken[ch.group] += da.req.Count
			devAff += ch.affinity
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

// pickGroup returns the first choice (best device affinity first) whose
// group still has count free instances once taken are set aside.
func pickGroup(choices []devChoice, u *nodeUsage, taken []int, count int) (devChoice, bool) {
	for _, ch := range choices {
		if u.free[ch.group]-taken[ch.group] >= count {
			return ch, true
		}
	}
	return devChoice{}, false
}

// dimDeviceMemory prefixes the exhausted dimension of a memory share that
// fits no instance: "device memory: nvidia/gpu".
const dimDeviceMemory = "device memory: "

// pickShare returns the first choice (best device affinity first) with an
// instance that has share MiB of memory left, not counting what *extra
// (per group, per instance MiB) already set aside in this fit, and records
// the share in *extra. An instance that was free becomes taken for whole
// requests.
func pickShare(choices []devChoice, u *nodeUsage, taken []int, extra *map[int][]int64, share int64) (devChoice, int, bool) {
	for _, ch := range choices {
		var ex []int64
		if *extra != nil {
			ex = (*extra)[ch.group]
		}
		ii := u.shareInstance(ch.group, share, ex)
		if ii < 0 {
			continue
		}
		if *extra == nil {
			*extra = map[int][]int64{}
		}
		if ex == nil {
			ex = make([]int64, len(u.node.NodeResources.Devices[ch.group].Instances))
			(*extra)[ch.group] = ex
		}
		if ex[ii] == 0 && u.sharedAt(ch.group, ii) == 0 {
			taken[ch.group]++
		}
		ex[ii] += share
		return ch, ii, true
	}
	return devChoice{}, -1, false
}

// assign takes the group's resources on the candidate's node and returns
// them per task. It must only be called after fit succeeded for the same
// usage.
func assign(ask *groupAsk, cand *candidate, u *nodeUsage, taken []int) *structs.AllocatedResources {
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
	clear(taken)
	for i, da := range ask.devices {
		if da.share > 0 {
			var none map[int][]int64
			ch, ii, ok := pickShare(cand.choices[i], u, taken, &none, da.share)
			if !ok {
				continue
			}
			clear(taken)
			g := u.node.NodeResources.Devices[ch.group]
			if u.shared[ch.group] == nil {
				u.shared[ch.group] = make([]int64, len(g.Instances))
			}
			if u.shared[ch.group][ii] == 0 {
				u.free[ch.group]--
				u.gpuFree--
			}
			u.shared[ch.group][ii] += da.share
			if u.unified {
				u.memUsed += da.share
			}
			tr := ar.Tasks[da.task]
			tr.Devices = append(tr.Devices, &structs.AllocatedDeviceResource{
				Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: []string{g.Instances[ii].ID}, MemoryMB: da.share,
			})
			continue
		}
		ch, ok := pickGroup(cand.choices[i], u, taken, da.req.Count)
		if !ok {
			continue
		}
		g := u.node.NodeResources.Devices[ch.group]
		ids := u.take(ch.group, da.req.Count)
		tr := ar.Tasks[da.task]
		tr.Devices = append(tr.Devices, &structs.AllocatedDeviceResource{
			Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: ids,
		})
	}
	u.cpuUsed += ask.cpu
	u.memUsed += ask.mem
	return ar
}
