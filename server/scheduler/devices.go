package scheduler

import (
	"github.com/gpulayer/gpulayer/structs"
)

// Device assignment. One function, pickDevices, decides where each device
// request of a group goes on a node; fit calls it to test a node and assign
// calls it again to take what it picked, so the two can never disagree. It
// works through the group's requests in task order and, for each, sees what
// the earlier requests of the same placement took: the instances they took
// whole and the memory shares they set aside, instance by instance, not only
// counts (a whole request and a share of the same group must not land on
// one instance; two shares must together fit the instance's memory).
//
// A whole request (Count instances) goes to the first of its choices (best
// device affinity first) that has Count free instances, the lowest IDs
// first. When no single device group has enough, it spans the choices in
// the same order, taking what each has free, as long as together they have
// Count: each choice already passed the request's name and constraints, so
// any mix of them serves it (Nomad's #26584 asks the same). A memory share
// goes to the instance of the first choice with room that has the least
// memory left after it (best fit), ties to the lowest ID.

// instRef names one device instance of a node: its device group and its
// index in the group's Instances.
type instRef struct{ group, inst int }

// devPick is where one device request goes: insts[first:first+n] of the
// scratch (one instance for a share), and the affinity weight it earns.
type devPick struct {
	first, n int
	affinity float64
}

// devScratch is the scratch space of one pickDevices call, reused across
// calls so that testing a node does not allocate. Per-instance slices are
// flat, indexed by off[group] + instance.
type devScratch struct {
	off   []int
	busy  []bool  // taken whole by an earlier request of this placement
	extra []int64 // MiB set aside by earlier shares of this placement
	// taken counts, per device group, the instances this placement made
	// unavailable to whole requests (taken whole, or shared when free).
	taken []int
	picks []devPick
	insts []instRef
}

// reset sizes the scratch for the node of u and clears it.
func (sc *devScratch) reset(u *nodeUsage) {
	var groups []*structs.DeviceGroup
	if u.node.NodeResources != nil {
		groups = u.node.NodeResources.Devices
	}
	sc.off = sc.off[:0]
	total := 0
	for _, g := range groups {
		sc.off = append(sc.off, total)
		if g != nil {
			total += len(g.Instances)
		}
	}
	if cap(sc.busy) < total {
		sc.busy = make([]bool, total)
		sc.extra = make([]int64, total)
	}
	sc.busy, sc.extra = sc.busy[:total], sc.extra[:total]
	clear(sc.busy)
	clear(sc.extra)
	if cap(sc.taken) < len(groups) {
		sc.taken = make([]int, len(groups))
	}
	sc.taken = sc.taken[:len(groups)]
	clear(sc.taken)
	sc.picks = sc.picks[:0]
	sc.insts = sc.insts[:0]
}

// wholeFree reports whether instance ii of group gi can be taken whole:
// healthy, not held whole or shared, not taken by this placement.
func (sc *devScratch) wholeFree(u *nodeUsage, gi, ii int) bool {
	in := u.node.NodeResources.Devices[gi].Instances[ii]
	k := sc.off[gi] + ii
	return in != nil && in.Healthy && !u.busy[gi][ii] && u.sharedAt(gi, ii) == 0 && !sc.busy[k] && sc.extra[k] == 0
}

// takeWhole takes the n lowest-ID instances of group gi that wholeFree
// allows (the caller checked there are n) and appends them to insts.
func (sc *devScratch) takeWhole(u *nodeUsage, gi, n int) {
	g := u.node.NodeResources.Devices[gi]
	for ; n > 0; n-- {
		best := -1
		for ii, in := range g.Instances {
			if sc.wholeFree(u, gi, ii) && (best < 0 || in.ID < g.Instances[best].ID) {
				best = ii
			}
		}
		sc.busy[sc.off[gi]+best] = true
		sc.taken[gi]++
		sc.insts = append(sc.insts, instRef{gi, best})
	}
}

// shareInstance returns the instance of group gi best fitting a share of
// mib MiB, given what this placement already set aside, or -1.
func (sc *devScratch) shareInstance(u *nodeUsage, gi int, mib int64) int {
	g := u.node.NodeResources.Devices[gi]
	best, bestLeft := -1, int64(0)
	for ii, in := range g.Instances {
		k := sc.off[gi] + ii
		if in == nil || !in.Healthy || u.busy[gi][ii] || sc.busy[k] {
			continue
		}
		left := u.groupMem[gi] - u.sharedAt(gi, ii) - sc.extra[k] - mib
		if left < 0 {
			continue
		}
		if best < 0 || left < bestLeft || (left == bestLeft && in.ID < g.Instances[best].ID) {
			best, bestLeft = ii, left
		}
	}
	return best
}

// pickDevices decides, in sc.picks (aligned with ask.devices), where each
// device request of the group goes on the candidate's node with usage u. It
// returns the device affinity weight earned, or the exhausted dimension
// ("devices: <name>" or "device memory: <name>") when a request cannot be
// served. With exact false, whole requests of a group that asks for no
// memory share are only counted, not given instances (enough for fit; the
// picks are then not usable by apply).
func pickDevices(ask *groupAsk, cand *candidate, u *nodeUsage, sc *devScratch, exact bool) (float64, string) {
	sc.reset(u)
	exact = exact || ask.shareMiB > 0
	var devAff float64
	for i := range ask.devices {
		da := &ask.devices[i]
		choices := cand.choices[i]
		first := len(sc.insts)
		if da.share > 0 {
			ii, ch := -1, devChoice{}
			for _, c := range choices {
				if ii = sc.shareInstance(u, c.group, da.share); ii >= 0 {
					ch = c
					break
				}
			}
			if ii < 0 {
				return 0, dimDeviceMemory + da.req.Name
			}
			k := sc.off[ch.group] + ii
			if sc.extra[k] == 0 && u.sharedAt(ch.group, ii) == 0 {
				sc.taken[ch.group]++
			}
			sc.extra[k] += da.share
			sc.insts = append(sc.insts, instRef{ch.group, ii})
			sc.picks = append(sc.picks, devPick{first: first, n: 1, affinity: ch.affinity})
			devAff += ch.affinity
			continue
		}
		count := da.req.Count
		aff, ok := 0.0, false
		for _, c := range choices {
			if u.free[c.group]-sc.taken[c.group] >= count {
				take(sc, u, c.group, count, exact)
				aff, ok = c.affinity, true
				break
			}
		}
		if !ok {
			avail := 0
			for _, c := range choices {
				avail += u.free[c.group] - sc.taken[c.group]
			}
			if avail < count {
				return 0, "devices: " + da.req.Name
			}
			left := count
			for _, c := range choices {
				n := min(left, u.free[c.group]-sc.taken[c.group])
				if n <= 0 {
					continue
				}
				take(sc, u, c.group, n, exact)
				aff += c.affinity * float64(n) / float64(count)
				left -= n
				if left == 0 {
					break
				}
			}
		}
		sc.picks = append(sc.picks, devPick{first: first, n: len(sc.insts) - first, affinity: aff})
		devAff += aff
	}
	return devAff, ""
}

// take takes n whole instances of group gi: exactly (which ones) or only by
// count.
func take(sc *devScratch, u *nodeUsage, gi, n int, exact bool) {
	if exact {
		sc.takeWhole(u, gi, n)
		return
	}
	sc.taken[gi] += n
}

// applyPicks takes on u what pickDevices (exact) picked and records the
// devices in ar, per task: one AllocatedDeviceResource per request and
// device group it draws from.
func applyPicks(ask *groupAsk, u *nodeUsage, sc *devScratch, ar *structs.AllocatedResources) {
	groups := u.node.NodeResources.Devices
	for i := range ask.devices {
		da := &ask.devices[i]
		p := sc.picks[i]
		tr := ar.Tasks[da.task]
		var cur *structs.AllocatedDeviceResource
		curGroup := -1
		for _, ref := range sc.insts[p.first : p.first+p.n] {
			g := groups[ref.group]
			id := g.Instances[ref.inst].ID
			if da.share > 0 {
				if u.shared[ref.group] == nil {
					u.shared[ref.group] = make([]int64, len(g.Instances))
				}
				if u.shared[ref.group][ref.inst] == 0 {
					u.free[ref.group]--
					u.gpuFree--
				}
				u.shared[ref.group][ref.inst] += da.share
				if u.unified {
					u.memUsed += da.share
				}
				tr.Devices = append(tr.Devices, &structs.AllocatedDeviceResource{
					Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: []string{id}, MemoryMB: da.share,
				})
				continue
			}
			u.busy[ref.group][ref.inst] = true
			u.free[ref.group]--
			u.gpuFree--
			if cur == nil || curGroup != ref.group {
				cur = &structs.AllocatedDeviceResource{Vendor: g.Vendor, Type: g.Type, Name: g.Name}
				curGroup = ref.group
				tr.Devices = append(tr.Devices, cur)
			}
			cur.DeviceIDs = append(cur.DeviceIDs, id)
		}
	}
}
