package scheduler

import (
	"github.com/gpulayer/gpulayer/structs"
)

// descGangRestart is the description of a gang member stopped because
// another member failed or was lost.
const descGangRestart = "gang member failed; restarting the whole gang"

// gangAttempt returns the attempt of a gang allocation (0 for one without
// GangInfo).
func gangAttempt(a *structs.Allocation) int {
	if a.Gang == nil {
		return 0
	}
	return a.Gang.Attempt
}

// gangRestarts returns the failure restarts of a gang allocation.
func gangRestarts(a *structs.Allocation) int {
	if a.Gang == nil {
		return 0
	}
	return a.Gang.Restarts
}

// reconcileGang reconciles one gang group (structs.TaskGroup.Gang). Only
// allocations of the latest attempt count; older ones are stopped if still
// live. The gang stands when every index in [0, count) has a live
// allocation (or, for a batch job, one that completed) and no member of the
// latest attempt failed, was lost or, for a service job, exited. A
// standing gang of an older job version is updated in place when the change
// cannot make its placement infeasible (placementUnaffected), else stopped and placed again whole. A gang that does not stand
// has its live members stopped and every index placed again with the next
// attempt number; when a member failed or was lost that counts as a
// restart, and past structs.GangMaxRestarts nothing is placed (the group is
// left failed).
func reconcileGang(job *structs.Job, tg *structs.TaskGroup, allocs []*structs.Allocation, res *reconcileResult) {
	latest, restarts := -1, 0
	for _, a := range allocs {
		latest = max(latest, gangAttempt(a))
		restarts = max(restarts, gangRestarts(a))
	}
	live := map[int]*structs.Allocation{}
	done := map[int]bool{}
	previous := map[int]*structs.Allocation{}
	broken := false
	for _, a := range allocs {
		switch a.DesiredStatus {
		case structs.AllocDesiredStatusStop, structs.AllocDesiredStatusEvict:
			continue
		}
		idx := a.Index()
		if a.ClientTerminalStatus() {
			if gangAttempt(a) != latest {
				continue
			}
			previous[idx] = a
			if job.Type == structs.JobTypeBatch && a.ClientStatus == structs.AllocClientStatusComplete && sameVersion(a, job) {
				done[idx] = true
				continue
			}
			broken = true
			continue
		}
		if idx >= tg.Count || live[idx] != nil || gangAttempt(a) != latest {
			res.stops = append(res.stops, stopRequest{a, descNotNeeded})
			continue
		}
		live[idx] = a
	}
	stands, current, metaOnly := !broken, true, true
	for idx := 0; idx < tg.Count; idx++ {
		a := live[idx]
		if a == nil {
			if !done[idx] {
				stands = false
			}
			continue
		}
		if !sameVersion(a, job) {
			current = false
			if !placementUnaffected(a.Job, job, tg.Name) {
				metaOnly = false
			}
		}
	}
	if stands && current {
		return
	}
	if stands && metaOnly {
		for idx := 0; idx < tg.Count; idx++ {
			if a := live[idx]; a != nil && !sameVersion(a, job) {
				u := a.Copy()
				u.Job = job
				res.inplace = append(res.inplace, u)
			}
		}
		return
	}
	attempt := latest + 1
	desc := descUpdating
	if broken {
		restarts++
		desc = descGangRestart
	}
	for idx := 0; idx < tg.Count; idx++ {
		if a := live[idx]; a != nil {
			res.stops = append(res.stops, stopRequest{a, desc})
		}
	}
	if restarts > structs.GangMaxRestarts {
		return
	}
	for idx := 0; idx < tg.Count; idx++ {
		prev := live[idx]
		if prev == nil {
			prev = previous[idx]
		}
		res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: prev, gangAttempt: attempt, gangRestarts: restarts})
	}
}

// setGangInfo gives each member of a fully placed gang its GangInfo. placed
// holds the members in index order and nodes their nodes.
func setGangInfo(job *structs.Job, tg *structs.TaskGroup, placed []*structs.Allocation, nodes []*structs.Node, attempt, restarts int) {
	peers := make([]string, len(placed))
	local := map[string]int{}
	port := structs.GangMasterPort(job.ID, tg.Name)
	for i := range placed {
		peers[i] = structs.NodeHost(nodes[i])
	}
	for _, a := range placed {
		a.Gang = &structs.GangInfo{
			Rank:       a.Index(),
			WorldSize:  tg.Count,
			LocalRank:  local[a.NodeID],
			MasterAddr: peers[0],
			MasterPort: port,
			Peers:      append([]string(nil), peers...),
			Attempt:    attempt,
			Restarts:   restarts,
		}
		local[a.NodeID]++
	}
}

// rollback takes a partly placed gang out of the plan and gives its
// resources back to the node usages (usages aligned with placed).
func rollback(plan *structs.Plan, placed []*structs.Allocation, usages []*nodeUsage) {
	for i, a := range placed {
		list := plan.NodeAllocation[a.NodeID]
		for j, b := range list {
			if b == a {
				list = append(list[:j], list[j+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(plan.NodeAllocation, a.NodeID)
		} else {
			plan.NodeAllocation[a.NodeID] = list
		}
		usages[i].release(a.AllocatedResources)
	}
}
