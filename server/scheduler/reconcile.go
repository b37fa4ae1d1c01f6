package scheduler

import (
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// stopRequest is an allocation to stop, with the reason shown to users.
type stopRequest struct {
	alloc *structs.Allocation
	desc  string
}

// placementRequest is one allocation to place: the group, its index in
// "job.group[index]", and the allocation it replaces, if any.
type placementRequest struct {
	tg       *structs.TaskGroup
	index    int
	previous *structs.Allocation
	// gangAttempt and gangRestarts are the GangInfo counters of a gang
	// group's placement.
	gangAttempt, gangRestarts int
}

// reconcileResult is the difference between the job's desired allocations
// and the ones that exist.
type reconcileResult struct {
	stops []stopRequest
	// inplace holds copies of allocations updated to the new job version
	// on their node, keeping their resources and devices.
	inplace []*structs.Allocation
	// places is in job group order, then index order.
	places []placementRequest
	// rescheduleAt is the earliest time, Unix nanoseconds, a failed
	// allocation kept only because its reschedule delay has not passed
	// becomes due; 0 when there is none.
	rescheduleAt int64
}

// reconcile compares the job (nil when it no longer exists) with all of its
// allocations. The rules:
//
//   - A missing or stopped job stops every allocation that is not terminal.
//   - Allocations of a group the job no longer has, of an index at or above
//     the group's count, or duplicating an index, are stopped.
//   - A live allocation (desired run, not client-terminal) whose job's
//     JobModifyIndex differs from the job's is updated: in place when only
//     Meta changed (job, group or task Meta), else destructively (stop it
//     and place a replacement at the same index). An allocation without a
//     Job is taken to be of the current version.
//   - A batch allocation of the current version that completed or failed
//     keeps its index: it is never replaced (failed batch allocations are
//     not rescheduled in this version). A lost batch allocation, and one of
//     an older job version, is replaced, as in Nomad (reconcile_util.go
//     filterOldTerminalAllocs), so an updated batch job runs again.
//   - A service allocation that is client-terminal (complete, failed, lost)
//     is replaced; the replacement names it in PreviousAllocation.
//   - An allocation the server already told to stop is ignored.
//   - With a group reschedule policy, a failed allocation (batch or
//     service) is replaced while the policy allows (rescheduleAllowed) and
//     kept, not replaced, once it does not. With a Delay, an allowed
//     replacement waits until the failed allocation's ModifyTime + Delay
//     (rescheduleDue): before then (now is the evaluation's time) the index
//     is kept and rescheduleAt records the earliest due time, so the
//     scheduler can evaluate the job again then. Gang groups ignore Delay.
//   - A live allocation marked DesiredTransition.Migrate (a node drain) is
//     not counted: its index gets a replacement (naming it previous) while
//     it keeps running; the drainer stops it once the replacement runs.
//   - A gang group is reconciled as a whole (see reconcileGang).
//
// Every index in [0, count) without a live or kept allocation is placed.
func reconcile(job *structs.Job, allocs []*structs.Allocation, now int64) reconcileResult {
	var res reconcileResult
	sorted := slices.Clone(allocs)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].CreateIndex != sorted[j].CreateIndex {
			return sorted[i].CreateIndex < sorted[j].CreateIndex
		}
		return sorted[i].ID < sorted[j].ID
	})
	if job == nil || job.Stop {
		for _, a := range sorted {
			if a != nil && !a.TerminalStatus() {
				res.stops = append(res.stops, stopRequest{a, descJobStopped})
			}
		}
		return res
	}
	byGroup := map[string][]*structs.Allocation{}
	for _, a := range sorted {
		if a == nil {
			continue
		}
		if job.LookupTaskGroup(a.TaskGroup) == nil {
			if !a.TerminalStatus() {
				res.stops = append(res.stops, stopRequest{a, descNotNeeded})
			}
			continue
		}
		byGroup[a.TaskGroup] = append(byGroup[a.TaskGroup], a)
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		if tg.Gang {
			reconcileGang(job, tg, byGroup[tg.Name], &res)
			continue
		}
		live := map[int]*structs.Allocation{}
		kept := map[int]bool{}
		previous := map[int]*structs.Allocation{}
		// migrating holds allocations a node drain moves: they keep
		// running, not counted live, until the drainer stops them once
		// their replacement runs.
		migrating := map[int]*structs.Allocation{}
		// failed holds, with a reschedule policy, the failed allocations
		// per index, oldest first.
		failed := map[int][]*structs.Allocation{}
		for _, a := range byGroup[tg.Name] {
			idx := a.Index()
			switch a.DesiredStatus {
			case structs.AllocDesiredStatusStop, structs.AllocDesiredStatusEvict:
				continue
			}
			if a.ClientTerminalStatus() && a.ClientStatus == structs.AllocClientStatusFailed && tg.ReschedulePolicy != nil {
				failed[idx] = append(failed[idx], a)
				continue
			}
			if a.ClientTerminalStatus() {
				if job.Type == structs.JobTypeBatch && sameVersion(a, job) && a.ClientStatus != structs.AllocClientStatusLost {
					kept[idx] = true
				} else {
					previous[idx] = a // the latest created wins
				}
				continue
			}
			if a.DesiredTransition.Migrate && idx < tg.Count && migrating[idx] == nil {
				migrating[idx] = a
				continue
			}
			if idx >= tg.Count || live[idx] != nil {
				res.stops = append(res.stops, stopRequest{a, descNotNeeded})
				continue
			}
			live[idx] = a
		}
		for idx, fs := range failed {
			if !rescheduleAllowed(tg.ReschedulePolicy, fs) {
				kept[idx] = true
				continue
			}
			newest := fs[len(fs)-1]
			if due := rescheduleDue(tg.ReschedulePolicy, fs); due > now {
				kept[idx] = true
				if live[idx] == nil && idx < tg.Count && (res.rescheduleAt == 0 || due < res.rescheduleAt) {
					res.rescheduleAt = due
				}
				continue
			}
			previous[idx] = newest
		}
		for idx := 0; idx < tg.Count; idx++ {
			a := live[idx]
			switch {
			case a == nil:
				if !kept[idx] {
					prev := previous[idx]
					if m := migrating[idx]; m != nil {
						prev = m
					}
					res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: prev})
				}
			case sameVersion(a, job):
			case onlyMetaChanged(a.Job, job, tg.Name):
				u := a.Copy()
				u.Job = job
				res.inplace = append(res.inplace, u)
			default:
				res.stops = append(res.stops, stopRequest{a, descUpdating})
				res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: a})
			}
		}
	}
	return res
}

// sameVersion reports whether the allocation runs the job's current
// version. An allocation without a Job counts as current.
func sameVersion(a *structs.Allocation, job *structs.Job) bool {
	return a.Job == nil || a.Job.JobModifyIndex == job.JobModifyIndex
}

// onlyMetaChanged reports whether old and cur differ, for the group, only in
// Meta (job, group or task) and the group's count, so running allocations
// can be updated in place.
func onlyMetaChanged(old, cur *structs.Job, group string) bool {
	if old == nil || cur == nil {
		return false
	}
	a, b := old.LookupTaskGroup(group), cur.LookupTaskGroup(group)
	if a == nil || b == nil {
		return false
	}
	if old.Type != cur.Type || !slices.Equal(old.Datacenters, cur.Datacenters) ||
		!reflect.DeepEqual(old.Constraints, cur.Constraints) || !reflect.DeepEqual(old.Affinities, cur.Affinities) {
		return false
	}
	return reflect.DeepEqual(withoutMeta(a), withoutMeta(b))
}

func withoutMeta(tg *structs.TaskGroup) *structs.TaskGroup {
	c := tg.Copy()
	c.Meta = nil
	c.Count = 0
	for _, t := range c.Tasks {
		if t != nil {
			t.Meta = nil
		}
	}
	return c
}

// rescheduleDue returns the time, Unix nanoseconds, the replacement of the
// newest of an index's failed allocations (oldest first) may be placed: its
// ModifyTime (when the client reported the failure) plus the policy's delay
// for the k-th failure (ReschedulePolicy.DelayFor), k counting the failures
// within Interval of the newest as rescheduleAllowed does; 0 (at once)
// without a delay.
func rescheduleDue(rp *structs.ReschedulePolicy, failed []*structs.Allocation) int64 {
	if rp.Delay <= 0 {
		return 0
	}
	newest := failed[len(failed)-1].ModifyTime
	k := 0
	for _, a := range failed {
		if rp.Interval == 0 || newest-a.ModifyTime <= int64(rp.Interval) {
			k++
		}
	}
	d := int64(rp.DelayFor(k))
	if newest > math.MaxInt64-d {
		return math.MaxInt64
	}
	return newest + d
}

// rescheduleAllowed reports whether the newest of an index's failed
// allocations (oldest first) may be replaced under the group's reschedule
// policy: without limit, or when the failures within Interval of the
// newest one's last update (all of them when Interval is 0) number at
// most Attempts. Times come from the allocations, so the decision is the
// same on every server.
func rescheduleAllowed(rp *structs.ReschedulePolicy, failed []*structs.Allocation) bool {
	if rp.Unlimited {
		return true
	}
	newest := failed[len(failed)-1].ModifyTime
	n := 0
	for _, a := range failed {
		if rp.Interval == 0 || newest-a.ModifyTime <= int64(rp.Interval) {
			n++
		}
	}
	return n <= rp.Attempts
}
