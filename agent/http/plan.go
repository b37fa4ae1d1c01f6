package http

import (
	"context"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// SchedulingServer is the part of a server that explains scheduling; the
// agent's *server.Server has it.
type SchedulingServer interface {
	// JobPlan reports what registering job would do, changing nothing.
	JobPlan(ctx context.Context, job *structs.Job) (*structs.JobPlanResponse, error)
	// JobQueue lists the jobs with work waiting, in placement order.
	JobQueue(ctx context.Context) ([]*structs.JobQueueEntry, error)
}

// schedulingRoutes registers the plan and queue routes.
func (h *handler) schedulingRoutes() {
	h.handle("PUT /v1/job/{id}/plan", h.jobPlan)
	h.handle("POST /v1/job/{id}/plan", h.jobPlan)
	h.handle("GET /v1/jobs/queue", h.jobQueue)
}

func (h *handler) schedulingServer() (SchedulingServer, error) {
	ss, ok := h.srv.(SchedulingServer)
	if !ok {
		return nil, &codedError{code: http.StatusNotImplemented, msg: "this server does not plan jobs"}
	}
	return ss, nil
}

// jobPlan handles PUT /v1/job/{id}/plan with {"Job": {...}}: what
// registering the job would do (structs.JobPlanResponse), with nothing
// changed. The job's ID must match the path; an invalid job is 400.
func (h *handler) jobPlan(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ss, err := h.schedulingServer()
	if err != nil {
		return nil, err
	}
	req, warnings, err := h.decodeJobRequest(w, r)
	if err != nil {
		return nil, err
	}
	if id := r.PathValue("id"); req.Job.ID != id {
		return nil, badRequest("job ID %q in the body does not match %q in the path", req.Job.ID, id)
	}
	if err := h.checkJobSubmit(r, req.Job.ID, req.Job.Namespace); err != nil {
		return nil, err
	}
	plan, err := ss.JobPlan(r.Context(), convert.JobToStructs(req.Job))
	if err != nil {
		return nil, err
	}
	out := convert.PlanRead(req.Job.ID, plan)
	out.Warnings = joinWarnings(out.Warnings, warnings)
	return out, nil
}

// jobQueue handles GET /v1/jobs/queue: the jobs with work waiting to be
// placed, in placement order, each with per group counts and reasons.
func (h *handler) jobQueue(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ss, err := h.schedulingServer()
	if err != nil {
		return nil, err
	}
	q, err := ss.JobQueue(r.Context())
	if err != nil {
		return nil, err
	}
	return convert.QueueRead(q), nil
}
