package scheduler

import (
	"github.com/gpulayer/gpulayer/structs"
)

// Reservations. An allocation evicted for job X (DesiredStatus "evict",
// PreemptedByJob X) keeps its resources reserved for X after its client
// stopped it, against every job of lower priority than X, for as long as X
// still waits for allocations. Without this, a lower-priority job (the
// evicted one, requeued, or any other) evaluated while X waits could take
// the capacity X evicted for, and X would evict again. X itself and jobs of
// X's priority or higher see no reservation. A reservation ends when X has
// all its allocations, is stopped or is gone.

// reservations decides, for one evaluation of job, which stopped evicted
// allocations still hold their resources for their preemptor.
type reservations struct {
	state State
	job   *structs.Job
	// waiting caches, per preemptor job ID, whether it reserves.
	waiting map[string]bool
}

// holds reports whether the client-terminal allocation a still holds its
// resources for the job that preempted it, as seen by r.job.
func (r *reservations) holds(a *structs.Allocation) (bool, error) {
	if !a.ClientTerminalStatus() {
		return false, nil
	}
	return r.reservedFor(a)
}

// reservedFor reports whether the evicted allocation a (running or not)
// makes room for a waiting job of higher priority than r.job.
func (r *reservations) reservedFor(a *structs.Allocation) (bool, error) {
	if r == nil || r.job == nil || a.DesiredStatus != structs.AllocDesiredStatusEvict || a.PreemptedByJob == "" ||
		a.PreemptedByJob == r.job.ID || a.AllocatedResources == nil {
		return false, nil
	}
	if w, ok := r.waiting[a.PreemptedByJob]; ok {
		return w, nil
	}
	w, err := r.preemptorWaits(a.PreemptedByJob)
	if err != nil {
		return false, err
	}
	if r.waiting == nil {
		r.waiting = map[string]bool{}
	}
	r.waiting[a.PreemptedByJob] = w
	return w, nil
}

// preemptorWaits reports whether job id exists, runs, has a higher
// priority than r.job and has fewer allocations than its groups' counts
// that run or (batch) completed.
func (r *reservations) preemptorWaits(id string) (bool, error) {
	x, err := r.state.JobByID(id)
	if err != nil || x == nil || x.Stop || x.Priority <= r.job.Priority {
		return false, err
	}
	allocs, err := r.state.AllocsByJob(id)
	if err != nil {
		return false, err
	}
	want := 0
	for _, tg := range x.TaskGroups {
		if tg != nil {
			want += tg.Count
		}
	}
	have := 0
	for _, a := range allocs {
		if a == nil || a.DesiredStatus != structs.AllocDesiredStatusRun {
			continue
		}
		if !a.ClientTerminalStatus() || a.ClientStatus == structs.AllocClientStatusComplete {
			have++
		}
	}
	return have < want, nil
}
