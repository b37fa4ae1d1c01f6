package server

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// gcThresholds are the ages one collection uses: an object is old enough
// once its last change (ModifyTime, or StatusUpdatedAt for a node) is at
// least this long before the collection's "now". Zero makes everything
// old enough (a forced collection).
type gcThresholds struct {
	// eval applies to the evaluations and allocations of service jobs.
	eval time.Duration
	// batchEval applies to those of batch jobs that still exist.
	batchEval time.Duration
	// job applies to whole stopped or finished batch jobs.
	job time.Duration
	// node applies to down nodes.
	node time.Duration
	// purged applies to the evaluations and allocations of jobs that no
	// longer exist.
	purged time.Duration
	// artifact applies to artifacts no job or allocation references.
	artifact time.Duration
}

// gcWork is what one collection removes.
type gcWork struct {
	// evals and allocs go through EvalDeleteRequest: evaluations and
	// allocations whose own state makes them safe to drop at any time.
	evals, allocs []string
	// jobs and nodes go through GCPurgeRequest, each conditional on its
	// ModifyIndex.
	jobs  []*structs.GCJobPurge
	nodes []*structs.GCNodePurge
}

// empty reports whether there is nothing to remove.
func (w *gcWork) empty() bool {
	return len(w.evals) == 0 && len(w.allocs) == 0 && len(w.jobs) == 0 && len(w.nodes) == 0
}

// result counts the work by kind, a purged job's evaluations and
// allocations included.
func (w *gcWork) result() *GCResult {
	r := &GCResult{Evals: len(w.evals), Allocs: len(w.allocs), Jobs: len(w.jobs), Nodes: len(w.nodes)}
	for _, j := range w.jobs {
		r.Evals += len(j.Evals)
		r.Allocs += len(j.Allocs)
	}
	return r
}

// gcView is the state one collection decides on, indexed for lookups.
type gcView struct {
	now   int64 // Unix nanoseconds
	th    gcThresholds
	jobs  map[string]*structs.Job
	nodes map[string]*structs.Node
	// jobList and nodeList hold the same, sorted by ID.
	jobList  []*structs.Job
	nodeList []*structs.Node
	evals    []*structs.Evaluation
	allocs   []*structs.Allocation
	byJob    map[string][]*structs.Allocation
	byEval   map[string][]*structs.Allocation
	byNode   map[string][]*structs.Allocation
	evalsOf  map[string][]*structs.Evaluation
	// gangAttempt is the highest Gang.Attempt per "job\x00group".
	gangAttempt map[string]int
	// newestFailure is the newest ModifyTime of a failed allocation told
	// to run, per "job\x00group\x00index".
	newestFailure map[string]int64
	// failureTimes holds, per job, group and index, the ModifyTimes of
	// its failed allocations told to run, newest first.
	failureTimes map[string][]int64
}

// selectGC decides, on one snapshot, what a collection at now (Unix
// nanoseconds, the leader's clock) with thresholds th removes. It reads
// only the snapshot, so the same snapshot, now and th give the same work.
// The rules follow Nomad's nomad/core_sched.go (jobGC, evalGC, nodeGC):
//
//   - An allocation is finished when its client reported it complete,
//     failed or lost, or when it was told to stop and its node no longer
//     exists. Nothing else is ever removed: a running allocation, or one
//     told to stop that its client has not confirmed, stays.
//   - Jobs: a job that was stopped, or a batch job that is dead, goes with
//     all its evaluations and allocations once every evaluation is
//     terminal (or blocked: a stopped job's blocked evaluation waits for
//     nothing), every allocation is finished, and the job's last activity
//     (its SubmitTime and the ModifyTime of each of its evaluations and
//     allocations) is th.job old.
//   - Allocations: a finished allocation th.eval old (th.batchEval for a
//     batch job, th.purged for a job that no longer exists) goes, unless
//     its job still exists, is not stopped, and its scheduler still reads
//     it (keptForScheduler). Those of a stopped or dead batch job wait for
//     the job's own collection above, so its last activity stays known.
//   - Evaluations: a terminal evaluation as old as its allocations must be
//     goes once all its allocations go too.
//   - Nodes: a down node whose status changed th.node ago and that has no
//     allocation holding resources goes.
//
// It returns the snapshot's read errors.
func selectGC(snap *state.StateSnapshot, now int64, th gcThresholds) (*gcWork, error) {
	v, err := newGCView(snap, now, th)
	if err != nil {
		return nil, err
	}
	w := &gcWork{}
	gone := map[string]bool{} // evaluations and allocations a job purge takes
	for _, job := range v.jobList {
		p := v.jobPurge(job)
		if p == nil {
			continue
		}
		w.jobs = append(w.jobs, p)
		for _, id := range p.Evals {
			gone[id] = true
		}
		for _, id := range p.Allocs {
			gone[id] = true
		}
	}
	allocGoes := map[string]bool{}
	for _, a := range v.allocs {
		if gone[a.ID] || !v.allocCollectable(a) {
			continue
		}
		allocGoes[a.ID] = true
		w.allocs = append(w.allocs, a.ID)
	}
	for _, e := range v.evals {
		if gone[e.ID] || !v.evalCollectable(e) {
			continue
		}
		all := true
		for _, a := range v.byEval[e.ID] {
			if !allocGoes[a.ID] {
				all = false
				break
			}
		}
		if all {
			w.evals = append(w.evals, e.ID)
		}
	}
	nodeCutoff := (now - int64(th.node)) / int64(time.Second)
	for _, n := range v.nodeList {
		if n.Status != structs.NodeStatusDown || n.StatusUpdatedAt > nodeCutoff {
			continue
		}
		busy := false
		for _, a := range v.byNode[n.ID] {
			if a.HoldsResources() {
				busy = true
				break
			}
		}
		if !busy {
			w.nodes = append(w.nodes, &structs.GCNodePurge{NodeID: n.ID, ModifyIndex: n.ModifyIndex})
		}
	}
	return w, nil
}

func newGCView(snap *state.StateSnapshot, now int64, th gcThresholds) (*gcView, error) {
	jobs, err := snap.Jobs(nil)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	nodes, err := snap.Nodes(nil)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	evals, err := snap.Evals(nil)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	allocs, err := snap.Allocs(nil)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	v := &gcView{
		now: now, th: th, evals: evals, allocs: allocs, jobList: jobs, nodeList: nodes,
		jobs: make(map[string]*structs.Job, len(jobs)), nodes: make(map[string]*structs.Node, len(nodes)),
		byJob: map[string][]*structs.Allocation{}, byEval: map[string][]*structs.Allocation{},
		byNode: map[string][]*structs.Allocation{}, evalsOf: map[string][]*structs.Evaluation{},
		gangAttempt: map[string]int{}, newestFailure: map[string]int64{},
		failureTimes: map[string][]int64{},
	}
	for _, j := range jobs {
		v.jobs[j.ID] = j
	}
	for _, n := range nodes {
		v.nodes[n.ID] = n
	}
	for _, e := range evals {
		v.evalsOf[e.JobID] = append(v.evalsOf[e.JobID], e)
	}
	for _, a := range allocs {
		v.byJob[a.JobID] = append(v.byJob[a.JobID], a)
		v.byEval[a.EvalID] = append(v.byEval[a.EvalID], a)
		v.byNode[a.NodeID] = append(v.byNode[a.NodeID], a)
		if a.Gang != nil {
			k := a.JobID + "\x00" + a.TaskGroup
			if cur, ok := v.gangAttempt[k]; !ok || a.Gang.Attempt > cur {
				v.gangAttempt[k] = a.Gang.Attempt
			}
		}
		if a.ClientStatus == structs.AllocClientStatusFailed && runDesired(a) {
			k := failureKey(a)
			v.newestFailure[k] = max(v.newestFailure[k], a.ModifyTime)
			v.failureTimes[k] = append(v.failureTimes[k], a.ModifyTime)
		}
	}
	for _, ts := range v.failureTimes {
		slices.SortFunc(ts, func(x, y int64) int { return cmp.Compare(y, x) })
	}
	return v, nil
}

// finished reports whether nothing of the allocation can still run: its
// client reported it terminal, or it was told to stop and its node is gone
// (no client is left to confirm).
func (v *gcView) finished(a *structs.Allocation) bool {
	if a.ClientTerminalStatus() {
		return true
	}
	return a.TerminalStatus() && v.nodes[a.NodeID] == nil
}

// collectedWithJob reports whether the job's evaluations and allocations
// wait for the job's own collection: it is stopped, or a dead batch job.
func collectedWithJob(job *structs.Job) bool {
	return job != nil && (job.Stop || (job.Type == structs.JobTypeBatch && job.Status == structs.JobStatusDead))
}

// evalDone reports whether an evaluation of job (nil when the job is gone)
// waits for nothing: it is terminal, or blocked while its job is stopped
// or gone (JobDeregister stops tracking it).
func evalDone(e *structs.Evaluation, job *structs.Job) bool {
	if e.TerminalStatus() {
		return true
	}
	return e.Status == structs.EvalStatusBlocked && (job == nil || job.Stop)
}

// cutoff returns the newest ModifyTime an evaluation or allocation of job
// (nil when gone) with job type typ may have to be collected.
func (v *gcView) cutoff(job *structs.Job, typ string) int64 {
	switch {
	case job == nil:
		return v.now - int64(v.th.purged)
	case typ == structs.JobTypeBatch:
		return v.now - int64(v.th.batchEval)
	default:
		return v.now - int64(v.th.eval)
	}
}

// jobPurge returns the purge of job when the job rule of selectGC holds,
// else nil.
func (v *gcView) jobPurge(job *structs.Job) *structs.GCJobPurge {
	if !collectedWithJob(job) || job.Status != structs.JobStatusDead {
		return nil
	}
	last := job.SubmitTime
	p := &structs.GCJobPurge{JobID: job.ID, ModifyIndex: job.ModifyIndex}
	for _, e := range v.evalsOf[job.ID] {
		if !evalDone(e, job) {
			return nil
		}
		last = max(last, e.ModifyTime)
		p.Evals = append(p.Evals, e.ID)
	}
	for _, a := range v.byJob[job.ID] {
		if !v.finished(a) {
			return nil
		}
		last = max(last, a.ModifyTime)
		p.Allocs = append(p.Allocs, a.ID)
	}
	if last > v.now-int64(v.th.job) {
		return nil
	}
	return p
}

// allocCollectable applies the allocation rule of selectGC.
func (v *gcView) allocCollectable(a *structs.Allocation) bool {
	job := v.jobs[a.JobID]
	if collectedWithJob(job) || !v.finished(a) {
		return false
	}
	typ := ""
	if job != nil {
		typ = job.Type
	}
	if a.ModifyTime > v.cutoff(job, typ) {
		return false
	}
	return job == nil || !v.keptForScheduler(job, a)
}

// evalCollectable applies the evaluation rule of selectGC, its
// allocations aside.
func (v *gcView) evalCollectable(e *structs.Evaluation) bool {
	job := v.jobs[e.JobID]
	if collectedWithJob(job) || !evalDone(e, job) {
		return false
	}
	return e.ModifyTime <= v.cutoff(job, e.Type)
}

// keptForScheduler reports whether the scheduler still reads a finished
// allocation of a live job (one that exists and is not stopped), so that
// removing it would change what the scheduler places. It mirrors
// server/scheduler's reconcile.go and gang.go:
//
//   - a gang group counts only allocations of its latest attempt, and takes
//     its attempt and restart numbers from them: those stay;
//   - allocations told to stop or evict are otherwise ignored;
//   - a batch allocation of the job's current version that completed or
//     failed (not lost) marks its index done; without it the index would
//     run again;
//   - a failed allocation of a group with a limited reschedule policy
//     counts against its attempts while it is within Interval of its
//     index's newest failure (always, when Interval is 0);
//   - with an unlimited policy that has a delay, the index's newest
//     failures (as many as can still change the delay, delaySteps) set
//     when the next replacement may start.
func (v *gcView) keptForScheduler(job *structs.Job, a *structs.Allocation) bool {
	tg := job.LookupTaskGroup(a.TaskGroup)
	if tg == nil {
		return false
	}
	if tg.Gang {
		latest, ok := v.gangAttempt[a.JobID+"\x00"+a.TaskGroup]
		attempt := 0
		if a.Gang != nil {
			attempt = a.Gang.Attempt
		}
		return !ok || attempt >= latest
	}
	if !runDesired(a) {
		return false
	}
	if job.Type == structs.JobTypeBatch && currentVersion(a, job) && a.ClientStatus != structs.AllocClientStatusLost {
		return true
	}
	rp := tg.ReschedulePolicy
	if a.ClientStatus != structs.AllocClientStatusFailed || rp == nil {
		return false
	}
	key := failureKey(a)
	inWindow := rp.Interval == 0 || v.newestFailure[key]-a.ModifyTime <= int64(rp.Interval)
	if !inWindow {
		return false
	}
	if !rp.Unlimited {
		return true
	}
	// Without a limit the failures still set the delay before the next
	// replacement (rescheduleDue counts them): keep the newest ones that
	// can change it, so a collection neither resets a growing backoff nor
	// removes the failure a replacement is waiting on.
	rank := 1 + sort.Search(len(v.failureTimes[key]), func(i int) bool { return v.failureTimes[key][i] <= a.ModifyTime })
	return rp.Delay > 0 && rank <= delaySteps(rp)
}

// delaySteps is how many of an index's newest failures can change the
// delay before its next replacement (structs.ReschedulePolicy.DelayFor):
// 1 for a constant delay; for an exponential one, the failures until the
// delay reaches MaxDelay (all of them, as math.MaxInt, without MaxDelay).
func delaySteps(rp *structs.ReschedulePolicy) int {
	if rp.DelayFunction != structs.RescheduleDelayExponential {
		return 1
	}
	if rp.MaxDelay <= 0 {
		return math.MaxInt
	}
	k := 1
	for rp.DelayFor(k) < rp.MaxDelay && k < 64 {
		k++
	}
	return k
}

// runDesired reports whether the servers still want the allocation to run.
func runDesired(a *structs.Allocation) bool {
	return a.DesiredStatus == "" || a.DesiredStatus == structs.AllocDesiredStatusRun
}

// currentVersion reports whether the allocation runs the job's current
// version (server/scheduler's sameVersion).
func currentVersion(a *structs.Allocation, job *structs.Job) bool {
	return a.Job == nil || a.Job.JobModifyIndex == job.JobModifyIndex
}

// failureKey identifies an allocation's job, group and index.
func failureKey(a *structs.Allocation) string {
	return fmt.Sprintf("%s\x00%s\x00%d", a.JobID, a.TaskGroup, a.Index())
}
