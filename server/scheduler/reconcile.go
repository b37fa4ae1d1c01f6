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
	// deploymentID is the deployment the placement belongs to; canary
	// marks a canary, surge a new allocation placed beside the live one
	// it replaces (max_unavailable = 0).
	deploymentID  string
	canary, surge bool
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
//   - Allocations of a group the job no longer has are stopped.
//   - A group keeps at most count allocations (see reconcileGroup for which
//     ones when there are more, as after a scale-down).
//   - A live allocation (desired run, not client-terminal) whose job's
//     JobModifyIndex differs from the job's is updated: in place when the
//     change cannot make its placement infeasible (placementUnaffected:
//     Meta, affinities, count), else destructively (stop it and place a
//     replacement at the same index). An allocation without a
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
	return reconcileDeployment(job, allocs, now, nil)
}

// reconcileDeployment is reconcile with the evaluation's deployment (nil:
// none): the groups in it are reconciled under their update strategy (see
// reconcileGroup and structs/deployment.go).
func reconcileDeployment(job *structs.Job, allocs []*structs.Allocation, now int64, dp *deployPlan) reconcileResult {
	var res reconcileResult
	sorted := slices.Clone(allocs)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].CreateIndex != sorted[j].CreateIndex {
			return sorted[i].CreateIndex < sorted[j].CreateIndex
		}
		return sorted[i].ID < sorted[j].ID
	})
	if job == nil || job.PlacesNothing() {
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
		reconcileGroup(job, tg, byGroup[tg.Name], now, dp.group(tg), &res)
	}
	dp.finish()
	return res
}

// Usefulness ranks of a live allocation competing for a group's slots: one
// being migrated off a draining node is stopped before one still pending,
// which is stopped before one running (see reconcileGroup).
const (
	rankMigrating = iota
	rankPending
	rankRunning
)

func usefulness(a *structs.Allocation) int {
	switch {
	case a.DesiredTransition.Migrate:
		return rankMigrating
	case a.ClientStatus == structs.AllocClientStatusRunning:
		return rankRunning
	}
	return rankPending
}

// reconcileGroup reconciles one group that is not a gang. The group has
// count slots, the indexes [0, count), less those whose batch allocation of
// the current version completed (its result stands). The live allocations
// (desired run, not client-terminal, including ones a drain migrates)
// compete for the slots, whatever their index: when there are more than
// slots, the most useful are kept (running, then pending, then migrating;
// ties to the lower index, then the older allocation) and the rest are
// stopped, so a scale-down gives up failed, migrating and pending
// allocations before running ones (Nomad fixed the same for #27906). A kept
// allocation keeps its own index when that is a slot, else it takes the
// lowest free slot (its name keeps its index: a slot is a place in the
// count, not a name). A slot a failed allocation holds (no reschedule left,
// or its delay not passed) is taken by a live allocation before any is
// stopped. A kept allocation that a drain migrates gets a replacement at its
// slot. A slot left without a live allocation is placed, unless a failed
// allocation is kept there.
//
// With a deployment (gd not nil; the group's update strategy is rolling):
// an unpromoted canary and a new allocation placed beside a live old one
// that is not yet healthy are held out of the slot competition (the old
// allocations keep their slots; a failed deployment stops them instead),
// allocations that run the current version (or can be updated to it in
// place) win slots over older ones, old allocations are replaced only
// while the deployment runs and is past its canaries, at most max_parallel
// less the allocations not yet healthy at a time, either stopped and
// replaced (the default) or first joined by a new allocation at the same
// index (max_unavailable = 0), and canaries are placed beside the old
// allocations until promotion. Placements and in-place updates join the
// deployment.
func reconcileGroup(job *structs.Job, tg *structs.TaskGroup, allocs []*structs.Allocation, now int64, gd *groupDeploy, res *reconcileResult) {
	live := map[string]bool{}
	if gd != nil {
		for _, a := range allocs {
			if !a.TerminalStatus() {
				live[a.ID] = true
			}
		}
	}
	// done marks slots whose batch allocation of the current version
	// completed; keptFailed those a failed allocation keeps (no
	// reschedule left, or waiting for its delay: waitDue).
	done := map[int]bool{}
	keptFailed := map[int]bool{}
	waitDue := map[int]int64{}
	previous := map[int]*structs.Allocation{}
	// failed holds, with a reschedule policy, the failed allocations
	// per index, oldest first.
	failed := map[int][]*structs.Allocation{}
	// migrating holds, per slot, the allocation a node drain moves: it
	// keeps running, not counted, until the drainer stops it once its
	// replacement runs.
	migrating := map[int]*structs.Allocation{}
	isSlot := func(idx int) bool { return idx >= 0 && idx < tg.Count && !done[idx] }
	var cands []*structs.Allocation
	for _, a := range allocs {
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
			switch {
			case job.Type == structs.JobTypeBatch && sameVersion(a, job) && a.ClientStatus == structs.AllocClientStatusComplete:
				done[idx] = true
			case job.Type == structs.JobTypeBatch && sameVersion(a, job) && a.ClientStatus != structs.AllocClientStatusLost:
				keptFailed[idx] = true
			default:
				previous[idx] = a // the latest created wins
			}
			continue
		}
		if a.DesiredTransition.Migrate && isSlot(idx) && migrating[idx] == nil {
			migrating[idx] = a
			continue
		}
		if gd != nil && sameVersion(a, job) && gd.holdAside(a, live, res) {
			continue
		}
		cands = append(cands, a)
	}
	for idx, fs := range failed {
		if !rescheduleAllowed(tg.ReschedulePolicy, fs) {
			keptFailed[idx] = true
			continue
		}
		if due := rescheduleDue(tg.ReschedulePolicy, fs); due > now {
			keptFailed[idx] = true
			waitDue[idx] = due
			continue
		}
		previous[idx] = fs[len(fs)-1]
	}
	slots := 0
	for idx := 0; idx < tg.Count; idx++ {
		if isSlot(idx) {
			slots++
		}
	}
	// The most useful first; allocs is in creation order, so a stable
	// sort leaves the older of two equal allocations first.
	sort.SliceStable(cands, func(i, j int) bool {
		if gd != nil {
			// The new version first: an old allocation gives its slot
			// to a healthy new one.
			if ci, cj := current(cands[i], job, tg), current(cands[j], job, tg); ci != cj {
				return ci
			}
		}
		ui, uj := usefulness(cands[i]), usefulness(cands[j])
		if ui != uj {
			return ui > uj
		}
		return cands[i].Index() < cands[j].Index()
	})
	if len(cands) > slots {
		for _, a := range cands[slots:] {
			desc := descNotNeeded
			if gd != nil && !current(a, job, tg) {
				desc = descReplacedByHealthy
			}
			res.stops = append(res.stops, stopRequest{a, desc})
		}
		cands = cands[:slots]
	}
	held := map[int]*structs.Allocation{}
	var homeless []*structs.Allocation
	for _, a := range cands {
		if idx := a.Index(); isSlot(idx) && held[idx] == nil {
			held[idx] = a
			continue
		}
		homeless = append(homeless, a)
	}
	// Homeless allocations take the free slots, those a migrating
	// allocation holds last: it is then not needed and stopped.
	for pass := 0; pass < 2; pass++ {
		for idx := 0; idx < tg.Count && len(homeless) > 0; idx++ {
			if !isSlot(idx) || held[idx] != nil || (migrating[idx] != nil) != (pass == 1) {
				continue
			}
			held[idx], homeless = homeless[0], homeless[1:]
			if m := migrating[idx]; m != nil {
				res.stops = append(res.stops, stopRequest{m, descNotNeeded})
				delete(migrating, idx)
			}
		}
	}
	var depID string
	budget := 0
	if gd != nil {
		depID = gd.id()
		budget = gd.budget()
		if gd.dp.isNew && tg.Update.Canary > 0 {
			// Canaries only when old allocations are to be replaced, not
			// for a first placement.
			for _, a := range held {
				if !current(a, job, tg) {
					gd.st.DesiredCanaries = tg.Update.Canary
					break
				}
			}
		}
	}
	first := len(res.places)
	for idx := 0; idx < tg.Count; idx++ {
		if !isSlot(idx) {
			continue
		}
		a := held[idx]
		switch {
		case a == nil && migrating[idx] != nil:
			res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: migrating[idx], deploymentID: depID})
		case a == nil:
			if due := waitDue[idx]; due > 0 && (res.rescheduleAt == 0 || due < res.rescheduleAt) {
				res.rescheduleAt = due
			}
			if !keptFailed[idx] {
				res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: previous[idx], deploymentID: depID})
			}
		case a.DesiredTransition.Migrate:
			// A migrating allocation that took a free slot is moved too.
			res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: a, deploymentID: depID})
		case sameVersion(a, job):
		case placementUnaffected(a.Job, job, tg.Name):
			u := a.Copy()
			u.Job = job
			if gd != nil {
				gd.inplaceDeployment(u)
			}
			res.inplace = append(res.inplace, u)
		case gd != nil:
			if !gd.mayReplace() || gd.surging[a.ID] || budget <= 0 {
				continue
			}
			budget--
			if tg.Update.SurgeFirst() {
				res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: a, deploymentID: depID, surge: true})
				continue
			}
			res.stops = append(res.stops, stopRequest{a, descUpdating})
			res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: a, deploymentID: depID})
		default:
			res.stops = append(res.stops, stopRequest{a, descUpdating})
			res.places = append(res.places, placementRequest{tg: tg, index: idx, previous: a})
		}
	}
	if gd != nil {
		if len(res.places) > first {
			gd.dp.used = true
		}
		gd.placeCanaries(tg, job, held, res)
	}
}

// sameVersion reports whether the allocation runs the job's current
// version. An allocation without a Job counts as current.
func sameVersion(a *structs.Allocation, job *structs.Job) bool {
	return a.Job == nil || a.Job.JobModifyIndex == job.JobModifyIndex
}

// placementUnaffected reports whether old and cur differ, for the group,
// only in what cannot make a placement made for old infeasible: Meta (job,
// group or task), affinities (job, group, task or device; they only rank
// nodes), the group's count, and job fields that do not place (priority,
// name, bookkeeping). The node class demands (GroupRequires,
// GroupAvailability), datacenters, node pool, constraints, drivers and resources must
// be the same. Allocations of old can then be updated in
// place, keeping their node and devices.
func placementUnaffected(old, cur *structs.Job, group string) bool {
	if old == nil || cur == nil {
		return false
	}
	a, b := old.LookupTaskGroup(group), cur.LookupTaskGroup(group)
	if a == nil || b == nil {
		return false
	}
	if old.Type != cur.Type || !slices.Equal(old.Datacenters, cur.Datacenters) ||
		structs.NodePoolOrDefault(old.NodePool) != structs.NodePoolOrDefault(cur.NodePool) ||
		!reflect.DeepEqual(old.Constraints, cur.Constraints) ||
		!slices.Equal(structs.GroupRequires(old, a), structs.GroupRequires(cur, b)) ||
		structs.GroupAvailability(old, a) != structs.GroupAvailability(cur, b) {
		return false
	}
	return reflect.DeepEqual(placementShape(a), placementShape(b))
}

// placementShape returns a copy of tg without what placementUnaffected
// ignores.
func placementShape(tg *structs.TaskGroup) *structs.TaskGroup {
	c := tg.Copy()
	c.Meta = nil
	c.Count = 0
	c.Affinities = nil
	for _, t := range c.Tasks {
		if t == nil {
			continue
		}
		t.Meta = nil
		t.Affinities = nil
		if t.Resources != nil {
			for _, d := range t.Resources.Devices {
				if d != nil {
					d.Affinities = nil
				}
			}
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
