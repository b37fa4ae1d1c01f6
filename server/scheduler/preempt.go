package scheduler

import (
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// Preemption. When n allocations of a group do not fit, preempt looks, for
// each of them in turn, at the nodes that passed feasibility:
//
//  1. A node that would fit once the allocations already told to stop or
//     be evicted, or stopped by this plan (but still running, so still
//     holding their GPUs), are gone
//     takes the allocation without evicting more; it is placed once they
//     stop (the evaluation is blocked until capacity frees).
//  2. Otherwise allocations of batch jobs whose priority is at least
//     structs.PreemptPriorityDelta below the job's are evicted, lowest
//     priority first (then largest CPU, then ID), on the node that needs
//     the fewest evictions (then the lowest highest evicted priority, then
//     the lowest node ID), until the allocation fits.
//
// Each allocation thus claimed is counted on that node's future usage, so
// one eviction is never counted for two allocations. Evictions go into the
// plan with DesiredStatus "evict"; the evicted jobs get new evaluations
// (see genericScheduler.Process) and go back to the queue. Nothing is
// placed by preempt itself: an evicted allocation holds its GPUs until its
// client reports it stopped, so no two processes ever share a GPU. For a
// gang, nothing is evicted unless every member can be claimed.
//
// It returns how many of the n allocations it found room for (once the
// allocations being stopped or evicted are gone) and how many allocations
// it evicted; for a gang that cannot be claimed whole, 0 and 0.
func (c *evalCtx) preempt(plan *structs.Plan, g *groupScan, n int, out *attempt) (claimedN, evictedN int) {
	prio := c.job.Priority
	// A job too low in priority to evict anything can still wait for
	// allocations being stopped (rule 1).
	canEvict := prio-structs.PreemptPriorityDelta >= structs.JobMinPriority
	// stopping reports whether an allocation is being stopped: told so
	// already, or by this plan (a destructive update's old allocation).
	stopping := func(a *structs.Allocation) bool {
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			return true
		}
		for _, b := range plan.NodeUpdate[a.NodeID] {
			if b.ID == a.ID {
				return true
			}
		}
		return false
	}
	evictable := func(a *structs.Allocation) bool {
		return canEvict && !stopping(a) && a.Job != nil &&
			a.Job.Type == structs.JobTypeBatch && a.Job.Priority <= prio-structs.PreemptPriorityDelta
	}
	// Only nodes with allocations being freed or evictable can help.
	var useful []int
	for i, u := range g.usages {
		for _, a := range u.allocs {
			if stopping(a) || evictable(a) {
				useful = append(useful, i)
				break
			}
		}
	}
	if len(useful) == 0 {
		return 0, 0
	}
	future := map[int]*nodeUsage{}
	futureOf := func(i int) *nodeUsage {
		if f := future[i]; f != nil {
			return f
		}
		f := g.usages[i].clone()
		for _, a := range f.allocs {
			// What is being stopped frees up, except what was evicted
			// for a waiting job of higher priority (see reservations);
			// when the state cannot tell, it stays held.
			if !stopping(a) {
				continue
			}
			if reserved, err := c.usage.reserve.reservedFor(a); err == nil && !reserved {
				f.add(a.AllocatedResources, -1)
			}
		}
		f.recount()
		future[i] = f
		return f
	}
	var sc devScratch
	fits := func(i int, u *nodeUsage) bool {
		_, dim := fit(g.ask, g.cands[i], u, &sc)
		return dim == ""
	}
	claimed := 0
	// claim takes the allocation's resources on the node's future usage;
	// it is only called after fits, so assign cannot fail there, and if it
	// did the allocation would just not be claimed.
	claim := func(i int, u *nodeUsage) bool {
		_, err := assign(g.ask, g.cands[i], u, &sc)
		return err == nil
	}
	var evictions []*structs.Allocation
	defer func() {
		// A gang is placed whole or not at all: evict nothing for a part.
		if g.ask.tg.Gang && claimed < n {
			claimedN, evictedN = 0, 0
			return
		}
		claimedN, evictedN = claimed, len(evictions)
		for _, a := range evictions {
			plan.AppendPreemptedAlloc(a, c.job.ID, prio)
			if out.preempted == nil {
				out.preempted = map[string]*structs.Job{}
			}
			out.preempted[a.JobID] = a.Job
		}
	}()
	for ; claimed < n; claimed++ {
		done := false
		for _, i := range useful {
			if f := futureOf(i); fits(i, f) {
				done = claim(i, f)
				break
			}
		}
		if done {
			continue
		}
		bestI, bestN, bestPrio := -1, 0, 0
		var bestEvict []*structs.Allocation
		var bestU *nodeUsage
		for _, i := range useful {
			f := futureOf(i)
			var cands []*structs.Allocation
			for _, a := range f.allocs {
				if evictable(a) {
					cands = append(cands, a)
				}
			}
			if len(cands) == 0 {
				continue
			}
			sort.Slice(cands, func(x, y int) bool {
				a, b := cands[x], cands[y]
				if a.Job.Priority != b.Job.Priority {
					return a.Job.Priority < b.Job.Priority
				}
				ca, cb := allocCPU(a), allocCPU(b)
				if ca != cb {
					return ca > cb
				}
				return a.ID < b.ID
			})
			trial := f.clone()
			for m, a := range cands {
				trial.release(a.AllocatedResources)
				if !fits(i, trial) {
					continue
				}
				ev := cands[:m+1]
				top := ev[len(ev)-1].Job.Priority
				better := bestI < 0 || len(ev) < bestN || (len(ev) == bestN && top < bestPrio) ||
					(len(ev) == bestN && top == bestPrio && g.cands[i].node.ID < g.cands[bestI].node.ID)
				if better {
					bestI, bestN, bestPrio, bestEvict, bestU = i, len(ev), top, ev, trial
				}
				break
			}
		}
		if bestI < 0 {
			return // the deferred function sets the results
		}
		for _, a := range bestEvict {
			evictions = append(evictions, a)
			// The future usage no longer lists it as evictable.
			for j, b := range bestU.allocs {
				if b == a {
					bestU.allocs = append(bestU.allocs[:j:j], bestU.allocs[j+1:]...)
					break
				}
			}
		}
		if !claim(bestI, bestU) {
			return
		}
		future[bestI] = bestU
	}
	return // the deferred function sets the results
}

// allocCPU returns the CPU an allocation holds, in MHz.
func allocCPU(a *structs.Allocation) int64 {
	var c int64
	if a.AllocatedResources != nil {
		for _, tr := range a.AllocatedResources.Tasks {
			if tr != nil {
				c += tr.CPU
			}
		}
	}
	return c
}
