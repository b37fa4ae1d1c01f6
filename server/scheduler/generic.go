package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// maxPlanAttempts bounds how often one evaluation plans again after the
// plan applier refused part of its plan. Nomad (scheduler/generic_sched.go)
// uses 5 for service jobs and 2 for batch jobs; GPUlayer uses 5 for both,
// because a failed evaluation is not followed up automatically here.
const maxPlanAttempts = 5

// descMaxAttempts is the StatusDescription of an evaluation that failed
// because its plan kept being refused.
const descMaxAttempts = "maximum attempts reached"

// descRequeued is the StatusDescription of the evaluation that puts a
// preempted job back in the queue.
const descRequeued = "requeued after its allocations were preempted"

// descInvalidJob starts the StatusDescription of an evaluation failed
// because its job breaks the count limits (structs.Job.ValidateCounts); the
// problems follow. The endpoints refuse such a job, but one stored by an
// older build would otherwise make the scheduler allocate without bound.
const descInvalidJob = "job not planned: it fails validation (stop it or register a fixed version)"

// errNoRefresh is returned when the planner refused part of a plan but gave
// no fresher state to plan against.
var errNoRefresh = errors.New("plan partly refused without a state to refresh from")

// New returns the scheduler for jobType: one generic implementation serves
// "batch" and "service" (structs.JobTypeBatch, structs.JobTypeService),
// differing only in how finished allocations are treated (see reconcile).
// It returns an error matching structs.ErrInvalid for any other job type or
// a nil state or planner.
func New(jobType string, state State, planner Planner) (Scheduler, error) {
	switch jobType {
	case structs.JobTypeBatch, structs.JobTypeService:
	default:
		return nil, fmt.Errorf("scheduler: no scheduler for job type %q: %w", jobType, structs.ErrInvalid)
	}
	if state == nil || planner == nil {
		return nil, fmt.Errorf("scheduler: state and planner are required: %w", structs.ErrInvalid)
	}
	return &genericScheduler{jobType: jobType, state: state, planner: planner}, nil
}

// genericScheduler places batch and service jobs.
type genericScheduler struct {
	jobType string
	state   State
	planner Planner
}

// attempt is the outcome of planning once against one state.
type attempt struct {
	plan   *structs.Plan
	job    *structs.Job
	failed map[string]*structs.AllocMetric
	queued map[string]int
	// preempted holds the jobs whose allocations the plan evicts.
	preempted map[string]*structs.Job
	// rescheduleAt is reconcileResult.rescheduleAt: when a failed
	// allocation waiting for its reschedule delay becomes due (0: none).
	rescheduleAt int64
	// invalid holds the problems of a job that breaks the count limits;
	// the attempt then plans nothing.
	invalid []string
}

// Process reconciles the evaluation's job with the cluster, submits the
// plan, and records the evaluation's outcome through the planner. It never
// changes eval itself; the planner receives a copy.
//
// When the plan applier refuses part of a plan (RefreshIndex non-zero), it
// plans again against the fresher state, at most maxPlanAttempts times in
// all; after that the evaluation is updated with Status "failed" and
// StatusDescription "maximum attempts reached".
//
// Groups that could not be placed in full are recorded in FailedTGAllocs
// (why) and QueuedAllocations (how many; 0 for groups that were placed in
// full). The blocked evaluation rule: an evaluation that is itself a
// blocked evaluation being reprocessed (Status "blocked" or TriggeredBy
// "queued-allocs") is updated with Status "blocked" again and no new
// evaluation is created; any other evaluation with unplaced groups creates
// exactly one new evaluation through Planner.CreateEval (Status "blocked",
// TriggeredBy "queued-allocs", PreviousEval the evaluation's ID, same job,
// namespace, priority and type, QueuedAllocations and FailedTGAllocs
// copied), is updated with Status "complete" and BlockedEval set to the
// new evaluation's ID. An evaluation with nothing left to place ends
// "complete".
//
// A job that is not stopped and breaks the count limits
// (structs.Job.ValidateCounts) is not planned: the evaluation is updated
// with Status "failed" and a StatusDescription that starts with
// descInvalidJob and lists the problems.
//
// A failed allocation kept only because its group's reschedule delay has
// not passed at the evaluation's time (Evaluation.EvalTime) gets one
// follow-up evaluation (see rescheduleLater).
//
// Process returns an error, and updates nothing, only when the state or the
// planner failed; the worker should nack the evaluation for a retry.
func (s *genericScheduler) Process(eval *structs.Evaluation) error {
	if eval == nil {
		return fmt.Errorf("scheduler: nil evaluation: %w", structs.ErrInvalid)
	}
	ev := eval.Copy()
	state := s.state
	var out *attempt
	preempted := map[string]*structs.Job{}
	for n := 0; ; n++ {
		if n == maxPlanAttempts {
			ev.Status = structs.EvalStatusFailed
			ev.StatusDescription = descMaxAttempts
			if err := s.planner.UpdateEval(ev); err != nil {
				return fmt.Errorf("scheduler: update eval %s: %w", ev.ID, err)
			}
			return nil
		}
		var err error
		out, err = computeAttempt(state, ev)
		if err != nil {
			return fmt.Errorf("scheduler: eval %s: %w", ev.ID, err)
		}
		ev.SnapshotIndex = out.plan.SnapshotIndex
		if out.plan.IsNoOp() {
			break
		}
		result, newState, err := s.planner.SubmitPlan(out.plan)
		if err != nil {
			return fmt.Errorf("scheduler: submit plan for eval %s: %w", ev.ID, err)
		}
		if result == nil {
			return fmt.Errorf("scheduler: submit plan for eval %s: no result", ev.ID)
		}
		for id, j := range out.preempted {
			preempted[id] = j
		}
		full, _, _ := result.FullCommit(out.plan)
		if full && result.RefreshIndex == 0 {
			break
		}
		if newState == nil {
			return fmt.Errorf("scheduler: eval %s: %w", ev.ID, errNoRefresh)
		}
		state = newState
	}
	if err := s.requeuePreempted(ev, preempted); err != nil {
		return err
	}
	if len(out.invalid) > 0 {
		ev.Status = structs.EvalStatusFailed
		ev.StatusDescription = descInvalidJob + ": " + strings.Join(out.invalid, "; ")
		if err := s.planner.UpdateEval(ev); err != nil {
			return fmt.Errorf("scheduler: update eval %s: %w", ev.ID, err)
		}
		return nil
	}
	if err := s.rescheduleLater(ev, out); err != nil {
		return err
	}
	return s.finish(ev, out)
}

// rescheduleLater creates, when the attempt kept a failed allocation only
// because its reschedule delay has not passed, one pending evaluation
// (TriggeredBy "reschedule-later", PreviousEval ev's ID) with WaitUntil the
// earliest due time: the eval broker holds it until then, and its
// evaluation time (Evaluation.EvalTime) is then at least the due time, so
// it places the replacement.
func (s *genericScheduler) rescheduleLater(ev *structs.Evaluation, out *attempt) error {
	if out.rescheduleAt == 0 || out.job == nil || out.job.PlacesNothing() {
		return nil
	}
	j := out.job
	e := &structs.Evaluation{
		ID: structs.GenerateUUID(), Namespace: j.Namespace, Priority: j.Priority, Type: j.Type,
		TriggeredBy: structs.EvalTriggerRescheduleLater, JobID: j.ID, JobModifyIndex: j.JobModifyIndex,
		Status: structs.EvalStatusPending, PreviousEval: ev.ID, SnapshotIndex: ev.SnapshotIndex,
		WaitUntil: out.rescheduleAt,
	}
	if err := s.planner.CreateEval(e); err != nil {
		return fmt.Errorf("scheduler: create reschedule-later eval for job %q: %w", j.ID, err)
	}
	return nil
}

// requeuePreempted creates a blocked evaluation (TriggeredBy "preemption")
// for each job whose allocations a plan of ev evicted, in job ID order, so
// the evicted work goes back to the queue. It is blocked, not pending, so it
// is evaluated again only once capacity frees, together with the blocked
// evaluation of the job that preempted it, which has the higher priority
// and so is dequeued first; a pending one would take whatever is free at
// once, possibly the very capacity the preempting job waits for, and the
// two would evict each other's work forever.
func (s *genericScheduler) requeuePreempted(ev *structs.Evaluation, jobs map[string]*structs.Job) error {
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := jobs[id]
		e := &structs.Evaluation{
			ID: structs.GenerateUUID(), Namespace: j.Namespace, Priority: j.Priority, Type: j.Type,
			TriggeredBy: structs.EvalTriggerPreemption, JobID: j.ID, JobModifyIndex: j.JobModifyIndex,
			Status: structs.EvalStatusBlocked, StatusDescription: descRequeued, PreviousEval: ev.ID,
			SnapshotIndex: ev.SnapshotIndex,
		}
		if err := s.planner.CreateEval(e); err != nil {
			return fmt.Errorf("scheduler: create eval for preempted job %q: %w", id, err)
		}
	}
	return nil
}

// finish records the evaluation's outcome and, when groups are left
// unplaced, the blocked evaluation (see Process).
func (s *genericScheduler) finish(ev *structs.Evaluation, out *attempt) error {
	ev.FailedTGAllocs = nil
	if len(out.failed) > 0 {
		ev.FailedTGAllocs = out.failed
	}
	ev.QueuedAllocations = out.queued
	ev.StatusDescription = ""
	ev.Status = structs.EvalStatusComplete
	if len(out.failed) > 0 {
		if isBlockedEval(ev) {
			ev.Status = structs.EvalStatusBlocked
		} else {
			blocked := &structs.Evaluation{
				ID:                structs.GenerateUUID(),
				Namespace:         ev.Namespace,
				Priority:          ev.Priority,
				Type:              ev.Type,
				TriggeredBy:       structs.EvalTriggerQueuedAllocs,
				JobID:             ev.JobID,
				JobModifyIndex:    ev.JobModifyIndex,
				Status:            structs.EvalStatusBlocked,
				StatusDescription: descQueuedBlocked,
				PreviousEval:      ev.ID,
				SnapshotIndex:     ev.SnapshotIndex,
			}
			if out.job != nil {
				blocked.Namespace, blocked.Priority, blocked.Type = out.job.Namespace, out.job.Priority, out.job.Type
				blocked.JobModifyIndex = out.job.JobModifyIndex
			}
			c := ev.Copy()
			blocked.FailedTGAllocs, blocked.QueuedAllocations = c.FailedTGAllocs, c.QueuedAllocations
			if err := s.planner.CreateEval(blocked); err != nil {
				return fmt.Errorf("scheduler: create blocked eval for eval %s: %w", ev.ID, err)
			}
			ev.BlockedEval = blocked.ID
		}
	}
	if err := s.planner.UpdateEval(ev); err != nil {
		return fmt.Errorf("scheduler: update eval %s: %w", ev.ID, err)
	}
	return nil
}

// isBlockedEval reports whether ev is a blocked evaluation being
// reprocessed.
func isBlockedEval(ev *structs.Evaluation) bool {
	return ev.Status == structs.EvalStatusBlocked || ev.TriggeredBy == structs.EvalTriggerQueuedAllocs
}

// computeAttempt plans the evaluation once against state.
func computeAttempt(state State, ev *structs.Evaluation) (*attempt, error) {
	job, err := state.JobByID(ev.JobID)
	if err != nil {
		return nil, fmt.Errorf("read job %q: %w", ev.JobID, err)
	}
	allocs, err := state.AllocsByJob(ev.JobID)
	if err != nil {
		return nil, fmt.Errorf("read allocations of job %q: %w", ev.JobID, err)
	}
	index, err := state.LatestIndex()
	if err != nil {
		return nil, fmt.Errorf("read state index: %w", err)
	}
	plan := &structs.Plan{EvalID: ev.ID, Priority: ev.Priority, Job: job, SnapshotIndex: index}
	out := &attempt{plan: plan, job: job}
	if job != nil {
		plan.Priority = job.Priority
	}
	if job != nil && !job.PlacesNothing() {
		var ve *structs.ValidationError
		if err := job.ValidateCounts(); errors.As(err, &ve) {
			out.invalid = ve.Problems
			return out, nil
		}
	}
	latest, err := state.LatestDeploymentByJobID(ev.JobID)
	if err != nil {
		return nil, fmt.Errorf("read deployment of job %q: %w", ev.JobID, err)
	}
	dp := planDeployment(job, latest)
	rec := reconcileDeployment(job, allocs, ev.EvalTime(), dp)
	plan.DeploymentUpdates = dp.updates
	if dp.isNew && dp.used {
		plan.Deployment = dp.d
	}
	out.rescheduleAt = rec.rescheduleAt
	for _, st := range rec.stops {
		plan.AppendStoppedAlloc(st.alloc, st.desc)
	}
	for _, a := range rec.inplace {
		a.EvalID = ev.ID
		plan.AppendAlloc(a)
	}
	if job == nil || job.PlacesNothing() {
		return out, nil
	}
	out.queued = make(map[string]int, len(job.TaskGroups))
	out.failed = map[string]*structs.AllocMetric{}
	for _, tg := range job.TaskGroups {
		if tg != nil {
			out.queued[tg.Name] = 0
		}
	}
	if len(rec.places) == 0 {
		return out, nil
	}
	nodes, err := state.Nodes()
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	nodes = sortedNodes(nodes)
	ctx := &evalCtx{eval: ev, job: job, nodes: nodes, rx: regexpCache{}, usage: newUsageIndex(state, job), allocs: allocs}
	if err := ctx.place(plan, rec.places, out); err != nil {
		return nil, err
	}
	noteWaitingCanaries(plan, dp, rec.places, out)
	return out, nil
}

// noteWaitingCanaries gives a running deployment whose canaries could not
// all be placed a description that says so (its progress deadline does not
// start until they are): the plan carries the deployment with it.
func noteWaitingCanaries(plan *structs.Plan, dp *deployPlan, places []placementRequest, out *attempt) {
	if dp.d == nil || dp.d.Status != structs.DeploymentStatusRunning {
		return
	}
	for _, req := range places {
		m := out.failed[req.tg.Name]
		if !req.canary || m == nil {
			continue
		}
		d := dp.d
		if !dp.isNew {
			d = dp.d.Copy()
		}
		d.StatusDescription = waitingDescription(req.tg.Name, m)
		plan.Deployment = d
		return
	}
}

// sortedNodes returns the non-nil nodes ordered by ID.
func sortedNodes(nodes []*structs.Node) []*structs.Node {
	out := make([]*structs.Node, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	less := func(a, b *structs.Node) int { return strings.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(out, less) {
		slices.SortFunc(out, less)
	}
	return out
}
