package server

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// JobDispatchRequest asks for a dispatch of a parameterized job: Payload
// (at most structs.MaxDispatchPayload bytes), Meta (keys from the job's
// meta_required and meta_optional) and an optional IdempotencyToken.
type JobDispatchRequest struct {
	JobID            string
	Payload          []byte
	Meta             map[string]string
	IdempotencyToken string
}

// JobDispatchResponse answers a dispatch (Nomad's shape). EvalID is empty
// when the child is held by max_running_children or when the idempotency
// token named an existing child.
type JobDispatchResponse struct {
	DispatchedJobID string
	EvalID          string
	EvalCreateIndex uint64
	JobCreateIndex  uint64
	structs.WriteMeta
}

// PeriodicForceResponse answers a forced periodic launch (Nomad's shape).
// EvalID is empty when the child is held by max_running_children.
type PeriodicForceResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	structs.WriteMeta
}

// periodicNow is the launcher's clock (Config.PeriodicClock or time.Now).
func (s *Server) periodicNow() time.Time {
	if s.config.PeriodicClock != nil {
		return s.config.PeriodicClock()
	}
	return time.Now()
}

// JobDispatch creates a child of the parameterized job req.JobID with the
// payload and meta given, and its evaluation, in one Raft entry. A second
// dispatch with the token of an existing child (not yet garbage-collected)
// creates nothing and names that child, as in Nomad. Errors: wrapping
// structs.ErrNotFound for an unknown job; a *structs.ValidationError
// (structs.ErrInvalid) for a job that is not parameterized or is stopped,
// a payload against the job's payload mode or over 16 KiB, a missing
// required meta key or an unknown one; structs.ErrNotLeader or
// structs.ErrShutdown.
func (s *Server) JobDispatch(ctx context.Context, req *JobDispatchRequest) (*JobDispatchResponse, error) {
	if req == nil {
		return nil, fmt.Errorf("job dispatch: %w: no request", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.JobDispatch(fctx, req)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	st := s.fsm.State()
	parent, err := st.JobByID(nil, req.JobID)
	if err != nil {
		return nil, fmt.Errorf("job dispatch %q: %w", req.JobID, err)
	}
	if parent == nil {
		return nil, fmt.Errorf("job %q: %w", req.JobID, structs.ErrNotFound)
	}
	if err := parent.DispatchProblems(req.Payload, req.Meta, req.IdempotencyToken); err != nil {
		return nil, err
	}
	if parent.Stop {
		return nil, &structs.ValidationError{Problems: []string{fmt.Sprintf("job %q is stopped; run it again to dispatch it", parent.ID)}}
	}
	if tok := req.IdempotencyToken; tok != "" {
		children, err := st.JobChildren(nil, parent.ID)
		if err != nil {
			return nil, fmt.Errorf("job dispatch %q: %w", parent.ID, err)
		}
		for _, c := range children {
			if c.DispatchIdempotencyToken == tok {
				return &JobDispatchResponse{DispatchedJobID: c.ID, JobCreateIndex: c.CreateIndex, WriteMeta: structs.WriteMeta{Index: c.ModifyIndex}}, nil
			}
		}
	}
	if err := s.heldQueueFull(parent); err != nil {
		return nil, err
	}
	now := time.Now()
	child := parent.NewChild(structs.DispatchChildID(parent.ID, now.Unix(), structs.GenerateUUID()))
	child.Dispatched = true
	child.Payload = append([]byte(nil), req.Payload...)
	child.DispatchIdempotencyToken = req.IdempotencyToken
	if len(req.Meta) > 0 {
		if child.Meta == nil {
			child.Meta = map[string]string{}
		}
		maps.Copy(child.Meta, req.Meta)
	}
	child.SubmitTime = now.UnixNano()
	if err := child.Validate(); err != nil {
		return nil, err
	}
	eval := childEval(child, structs.EvalTriggerJobRegister, now.UnixNano())
	raw, index, err := s.raftApply(structs.JobDispatchRequestType, &structs.JobDispatchRequest{Child: child, Eval: eval})
	if err != nil {
		return nil, fmt.Errorf("job dispatch %q: %w", parent.ID, err)
	}
	res, _ := raw.(*structs.ChildLaunchResult)
	if res == nil {
		return nil, fmt.Errorf("job dispatch %q: unexpected answer %T", parent.ID, raw)
	}
	resp := &JobDispatchResponse{DispatchedJobID: res.JobID, JobCreateIndex: index, WriteMeta: structs.WriteMeta{Index: index}}
	if !res.Created {
		if c, err := st.JobByID(nil, res.JobID); err == nil && c != nil {
			resp.JobCreateIndex = c.CreateIndex
		}
		return resp, nil
	}
	if !res.Held {
		s.enqueueChildEval(eval, index)
		resp.EvalID, resp.EvalCreateIndex = eval.ID, index
	}
	return resp, nil
}

// PeriodicForce launches a child of the periodic job jobID now, outside
// its schedule (Nomad's `job periodic force`): ID
// "<job>/periodic-<now>", not recorded as a scheduled launch, and not
// subject to prohibit_overlap (the user asked for it); it is held when
// max_running_children is reached. Errors: wrapping structs.ErrNotFound
// for an unknown job; a *structs.ValidationError for a job that is not
// periodic, is stopped, or was launched in this same second;
// structs.ErrNotLeader or structs.ErrShutdown.
func (s *Server) PeriodicForce(ctx context.Context, jobID string) (*PeriodicForceResponse, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.PeriodicForce(fctx, jobID)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, err
	}
	parent, err := s.fsm.State().JobByID(nil, jobID)
	if err != nil {
		return nil, fmt.Errorf("periodic force %q: %w", jobID, err)
	}
	if parent == nil {
		return nil, fmt.Errorf("job %q: %w", jobID, structs.ErrNotFound)
	}
	if !parent.IsPeriodic() {
		return nil, &structs.ValidationError{Problems: []string{fmt.Sprintf("job %q is not a periodic job; only a job with a periodic block can be forced", jobID)}}
	}
	if parent.Stop {
		return nil, &structs.ValidationError{Problems: []string{fmt.Sprintf("job %q is stopped; run it again to launch it", jobID)}}
	}
	if err := s.heldQueueFull(parent); err != nil {
		return nil, err
	}
	res, eval, index, err := s.launchPeriodic(parent, s.periodicNow().Unix(), true)
	if err != nil {
		return nil, err
	}
	if !res.Created {
		return nil, &structs.ValidationError{Problems: []string{fmt.Sprintf("job %q: child %q exists already (one launch a second); try again", jobID, res.JobID)}}
	}
	resp := &PeriodicForceResponse{WriteMeta: structs.WriteMeta{Index: index}}
	if !res.Held {
		resp.EvalID, resp.EvalCreateIndex = eval.ID, index
	}
	return resp, nil
}

// launchPeriodic commits the launch of parent's child for the time launch
// (Unix seconds) and hands its evaluation to the broker unless the child is
// held or the launch created nothing.
func (s *Server) launchPeriodic(parent *structs.Job, launch int64, forced bool) (*structs.ChildLaunchResult, *structs.Evaluation, uint64, error) {
	now := time.Now().UnixNano()
	child := parent.NewChild(structs.PeriodicChildID(parent.ID, launch))
	child.SubmitTime = now
	if err := child.Validate(); err != nil {
		return nil, nil, 0, err
	}
	eval := childEval(child, structs.EvalTriggerPeriodicJob, now)
	req := &structs.PeriodicLaunchRequest{ParentID: parent.ID, Launch: launch, Forced: forced, Child: child, Eval: eval}
	raw, index, err := s.raftApply(structs.PeriodicLaunchRequestType, req)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("periodic launch %q at %d: %w", parent.ID, launch, err)
	}
	res, _ := raw.(*structs.ChildLaunchResult)
	if res == nil {
		return nil, nil, 0, fmt.Errorf("periodic launch %q: unexpected answer %T", parent.ID, raw)
	}
	if res.Created && !res.Held {
		s.enqueueChildEval(eval, index)
	}
	return res, eval, index, nil
}

// heldQueueFull returns a *structs.ValidationError when parent, which has
// a max_running_children, already has Config.MaxHeldChildren children
// held, and nil otherwise. The leader checks before it proposes a child
// (the FSM does not: a limit of the leader's config must not decide what
// the log means); a race past it by a few children is harmless.
func (s *Server) heldQueueFull(parent *structs.Job) error {
	if parent.MaxRunningChildren == 0 {
		return nil
	}
	limit := s.config.MaxHeldChildren
	if limit <= 0 {
		limit = structs.MaxHeldChildren
	}
	children, err := s.fsm.State().JobChildren(nil, parent.ID)
	if err != nil {
		return fmt.Errorf("children of %q: %w", parent.ID, err)
	}
	held := 0
	for _, c := range children {
		if state.ChildWaiting(c) {
			held++
		}
	}
	if held < limit {
		return nil
	}
	return &structs.ValidationError{Problems: []string{fmt.Sprintf(
		"job %q has %d held children waiting for max_running_children = %d, the most this server keeps; try again when some have run",
		parent.ID, held, parent.MaxRunningChildren)}}
}

// childEval is the pending evaluation of a new or released child.
func childEval(child *structs.Job, trigger string, now int64) *structs.Evaluation {
	return &structs.Evaluation{
		ID:          structs.GenerateUUID(),
		Namespace:   child.Namespace,
		Priority:    child.Priority,
		Type:        child.Type,
		TriggeredBy: trigger,
		JobID:       child.ID,
		Status:      structs.EvalStatusPending,
		CreateTime:  now,
		ModifyTime:  now,
	}
}

// enqueueChildEval hands a committed child evaluation to the broker.
func (s *Server) enqueueChildEval(eval *structs.Evaluation, index uint64) {
	if stored, err := s.fsm.State().JobByID(nil, eval.JobID); err == nil && stored != nil {
		eval.JobModifyIndex = stored.JobModifyIndex
	}
	eval.CreateIndex, eval.ModifyIndex = index, index
	s.broker.Enqueue(eval)
}

// childFieldsProblem refuses a registration that sets what only the
// server sets on a child (ParentID, Dispatched, Payload, the idempotency
// token, Held), or "" when there is none.
func childFieldsProblem(job *structs.Job) error {
	var p []string
	if job.ParentID != "" {
		p = append(p, "ParentID: is set by the server on a periodic or dispatched child; register the parent job instead")
	}
	if job.Dispatched || len(job.Payload) > 0 || job.DispatchIdempotencyToken != "" {
		p = append(p, "Dispatched, Payload, DispatchIdempotencyToken: are set by dispatch (PUT /v1/job/:id/dispatch), not by registration")
	}
	if job.Held {
		p = append(p, "Held: is set by the server (max_running_children)")
	}
	if len(p) == 0 {
		return nil
	}
	return &structs.ValidationError{Problems: p}
}
