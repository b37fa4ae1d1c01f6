package server

import (
	"context"
	"fmt"
	"sort"

	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/server/scheduler"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// JobPlan reports what registering job would do, without doing it: it
// canonicalizes and validates the job, runs the scheduler against a
// snapshot of the current state in which the job is replaced by this
// version, with a planner that records the plan instead of submitting it
// (nothing is written through Raft), and returns the diff against the
// running version and, per task group, where allocations would go or why
// they would wait. A job declaring an endpoint name another live job of
// its namespace holds returns an error wrapping
// structs.ErrEndpointConflict. A job identical to the running version keeps its
// JobModifyIndex, so only missing allocations show. It returns the
// *structs.ValidationError of an invalid job as is (errors.Is(err,
// structs.ErrInvalid)).
func (s *Server) JobPlan(ctx context.Context, job *structs.Job) (*structs.JobPlanResponse, error) {
	if job == nil {
		return nil, fmt.Errorf("job plan: %w: no job", structs.ErrInvalid)
	}
	job = job.Copy()
	job.Canonicalize()
	if err := job.Validate(); err != nil {
		return nil, err
	}
	if err := fsm.EndpointNameConflict(s.fsm.State(), job); err != nil {
		return nil, err
	}
	snap, err := s.fsm.State().Snapshot()
	if err != nil {
		return nil, fmt.Errorf("job plan: snapshot: %w", err)
	}
	return planJob(snap, job)
}

// planJob is JobPlan against snap.
func planJob(snap *state.StateSnapshot, job *structs.Job) (*structs.JobPlanResponse, error) {
	old, err := snap.JobByID(nil, job.ID)
	if err != nil {
		return nil, fmt.Errorf("job plan: %w", err)
	}
	index, err := snap.LatestIndex()
	if err != nil {
		return nil, fmt.Errorf("job plan: %w", err)
	}
	resp := &structs.JobPlanResponse{Diff: structs.JobDiff(old, job)}
	job.JobModifyIndex = index + 1
	if old != nil {
		resp.JobModifyIndex = old.JobModifyIndex
		job.CreateIndex, job.Version, job.SubmitTime = old.CreateIndex, old.Version, old.SubmitTime
		if len(resp.Diff) == 0 {
			job.JobModifyIndex = old.JobModifyIndex
		}
	}
	st := &planState{schedState: schedState{snap: snap}, job: job}
	rec := &recordingPlanner{}
	sched, err := scheduler.New(job.Type, st, rec)
	if err != nil {
		return nil, fmt.Errorf("job plan: %w", err)
	}
	eval := &structs.Evaluation{
		ID: structs.GenerateUUID(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
		TriggeredBy: structs.EvalTriggerJobRegister, JobID: job.ID, JobModifyIndex: job.JobModifyIndex,
		Status: structs.EvalStatusPending,
	}
	if err := sched.Process(eval); err != nil {
		return nil, fmt.Errorf("job plan: %w", err)
	}
	existing := map[string]bool{}
	allocs, err := snap.AllocsByJob(nil, job.ID)
	if err != nil {
		return nil, fmt.Errorf("job plan: %w", err)
	}
	for _, a := range allocs {
		existing[a.ID] = true
	}
	groups := map[string]*structs.GroupPlan{}
	for _, tg := range job.TaskGroups {
		g := &structs.GroupPlan{Name: tg.Name, Nodes: map[string]int{}}
		groups[tg.Name] = g
		resp.Groups = append(resp.Groups, g)
	}
	for _, p := range rec.plans {
		for _, node := range sortedKeys(p.NodeAllocation) {
			for _, a := range p.NodeAllocation[node] {
				g := groups[a.TaskGroup]
				if g == nil {
					continue
				}
				if existing[a.ID] {
					g.InPlace++
					continue
				}
				g.Place++
				name := a.NodeName
				if name == "" {
					name = a.NodeID
				}
				g.Nodes[name]++
			}
		}
		for _, node := range sortedKeys(p.NodeUpdate) {
			for _, a := range p.NodeUpdate[node] {
				if a.DesiredStatus == structs.AllocDesiredStatusEvict && a.JobID != job.ID {
					resp.Preemptions = append(resp.Preemptions, fmt.Sprintf("%s on %s", a.Name, a.NodeName))
					continue
				}
				if g := groups[a.TaskGroup]; g != nil && a.JobID == job.ID {
					g.Stop++
				}
			}
		}
	}
	if ev := rec.evals[eval.ID]; ev != nil {
		for name, n := range ev.QueuedAllocations {
			if g := groups[name]; g != nil {
				g.Queued = n
				g.Failure = ev.FailedTGAllocs[name].Copy()
			}
		}
	}
	sort.Strings(resp.Preemptions)
	for _, tg := range job.TaskGroups {
		if g := groups[tg.Name]; g != nil {
			g.Notes = rolloutNotes(job, tg, g, allocs)
		}
	}
	return resp, nil
}

// rolloutNotes words how a group with a rolling update block would take
// the change: max_parallel at a time, canaries first, new copies beside
// old ones (max_unavailable = 0), and, when a new copy does not fit
// beside the old ones, that nothing stops until there is room.
func rolloutNotes(job *structs.Job, tg *structs.TaskGroup, g *structs.GroupPlan, allocs []*structs.Allocation) []string {
	u := tg.Update
	if job.Type != structs.JobTypeService || !u.Rolling() {
		return nil
	}
	old := 0
	for _, a := range allocs {
		if a.TaskGroup == tg.Name && !a.TerminalStatus() && a.Job != nil && a.Job.JobModifyIndex != job.JobModifyIndex {
			old++
		}
	}
	if old == 0 {
		return nil
	}
	var notes []string
	switch {
	case u.Canary > 0:
		notes = append(notes, fmt.Sprintf("deployment: %d canary beside the %d running; the rest waits for promotion", u.Canary, old))
	case u.SurgeFirst():
		notes = append(notes, fmt.Sprintf("deployment: %d at a time, each new copy healthy before an old one stops (max_unavailable = 0)", u.MaxParallel))
	default:
		notes = append(notes, fmt.Sprintf("deployment: %d at a time, each healthy for %s before the next", u.MaxParallel, u.MinHealthyTime))
	}
	if u.SurgeFirst() && g.Queued > 0 {
		notes = append(notes, "no room for a new copy beside the old ones: nothing stops until there is room")
	}
	return notes
}

// planState is a snapshot in which the planned job replaces the stored
// one.
type planState struct {
	schedState
	job *structs.Job
}

func (p *planState) JobByID(id string) (*structs.Job, error) {
	if id == p.job.ID {
		return p.job, nil
	}
	return p.schedState.JobByID(id)
}

// recordingPlanner is a scheduler.Planner that records instead of
// submitting: every plan "commits" in full, evaluations are kept by ID.
type recordingPlanner struct {
	plans []*structs.Plan
	evals map[string]*structs.Evaluation
}

func (r *recordingPlanner) SubmitPlan(plan *structs.Plan) (*structs.PlanResult, scheduler.State, error) {
	r.plans = append(r.plans, plan)
	return &structs.PlanResult{NodeUpdate: plan.NodeUpdate, NodeAllocation: plan.NodeAllocation}, nil, nil
}

func (r *recordingPlanner) UpdateEval(eval *structs.Evaluation) error {
	if r.evals == nil {
		r.evals = map[string]*structs.Evaluation{}
	}
	r.evals[eval.ID] = eval.Copy()
	return nil
}

func (r *recordingPlanner) CreateEval(eval *structs.Evaluation) error { return r.UpdateEval(eval) }

// JobQueue lists the jobs with work waiting to be placed, in the order it
// is placed (structs.SortQueue: priority, then submit time): every job with
// a blocked evaluation (its per group counts and reasons) or a pending one.
func (s *Server) JobQueue(ctx context.Context) ([]*structs.JobQueueEntry, error) {
	return jobQueue(s.fsm.State())
}

// jobQueue is JobQueue against st. Per job it takes its newest blocked
// evaluation, else its newest pending one.
func jobQueue(st *state.StateStore) ([]*structs.JobQueueEntry, error) {
	evals, err := st.Evals(nil)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	rank := func(e *structs.Evaluation) int {
		if e.Status == structs.EvalStatusBlocked {
			return 2
		}
		return 1
	}
	chosen := map[string]*structs.Evaluation{}
	for _, e := range evals {
		if e.Status != structs.EvalStatusBlocked && e.Status != structs.EvalStatusPending {
			continue
		}
		key := e.Namespace + "/" + e.JobID
		cur := chosen[key]
		if cur == nil || rank(e) > rank(cur) || (rank(e) == rank(cur) && e.ModifyIndex > cur.ModifyIndex) {
			chosen[key] = e
		}
	}
	out := []*structs.JobQueueEntry{}
	for _, e := range chosen {
		job, err := st.JobByID(nil, e.JobID)
		if err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		if job == nil || job.Stop {
			continue
		}
		q := &structs.JobQueueEntry{
			JobID: job.ID, Namespace: job.Namespace, Type: job.Type, Priority: job.Priority, SubmitTime: job.SubmitTime,
			EvalID: e.ID, Status: e.Status, Queued: map[string]int{}, Reasons: map[string]string{},
		}
		for g, n := range e.QueuedAllocations {
			if n > 0 {
				q.Queued[g] = n
			}
		}
		for g, m := range e.FailedTGAllocs {
			q.Reasons[g] = m.Explain()
		}
		if e.Status == structs.EvalStatusPending {
			for _, tg := range job.TaskGroups {
				if tg != nil {
					q.Reasons[tg.Name] = "waiting for a scheduler"
				}
			}
		}
		out = append(out, q)
	}
	structs.SortQueue(out)
	return out, nil
}
