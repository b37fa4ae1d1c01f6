package http

import (
	"context"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// JobVersionServer is the part of a server that keeps job versions; the
// agent's *server.Server has it.
type JobVersionServer interface {
	// JobVersions returns the kept versions of a job, newest first.
	JobVersions(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error)
	// JobRevert registers an older version again.
	JobRevert(ctx context.Context, req *structs.JobRevertRequest) (*structs.JobRegisterResponse, error)
	// JobStability marks a version stable or not.
	JobStability(ctx context.Context, req *structs.JobStabilityRequest) (uint64, error)
}

// jobVersionRoutes registers the job version routes (Nomad's
// /v1/job/:id/versions, /revert and /stable).
func (h *handler) jobVersionRoutes() {
	h.handle("GET /v1/job/{id}/versions", h.jobVersions)
	h.handle("PUT /v1/job/{id}/revert", h.jobRevert)
	h.handle("POST /v1/job/{id}/revert", h.jobRevert)
	h.handle("PUT /v1/job/{id}/stable", h.jobStable)
	h.handle("POST /v1/job/{id}/stable", h.jobStable)
}

func (h *handler) jobVersionServer() (JobVersionServer, error) {
	vs, ok := h.srv.(JobVersionServer)
	if !ok {
		return nil, &codedError{code: http.StatusNotImplemented, msg: "this server does not keep job versions"}
	}
	return vs, nil
}

// jobVersions handles GET /v1/job/{id}/versions (?diffs=true, blocking):
// api.JobVersionsResponse.
func (h *handler) jobVersions(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	vs, err := h.jobVersionServer()
	if err != nil {
		return nil, err
	}
	diffs, err := parseBool(r, "diffs")
	if err != nil {
		return nil, err
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	versions, meta, err := vs.JobVersions(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return convert.JobVersionsFromStructs(versions, diffs, h.region), nil
}

// jobRevert handles PUT /v1/job/{id}/revert with {"JobID", "JobVersion",
// "EnforcePriorVersion"}: the old version registered again; answers the
// register response.
func (h *handler) jobRevert(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	vs, err := h.jobVersionServer()
	if err != nil {
		return nil, err
	}
	var req api.JobRevertRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if req.JobID == "" {
		req.JobID = id
	}
	if req.JobID != id {
		return nil, badRequest("JobID %q in the body does not match %q in the path", req.JobID, id)
	}
	resp, err := vs.JobRevert(r.Context(), &structs.JobRevertRequest{JobID: id, JobVersion: req.JobVersion, EnforcePriorVersion: req.EnforcePriorVersion})
	if err != nil {
		return nil, err
	}
	setIndex(w, resp.Index)
	return resp, nil
}

// jobStable handles PUT /v1/job/{id}/stable with {"JobID", "JobVersion",
// "Stable"}.
func (h *handler) jobStable(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	vs, err := h.jobVersionServer()
	if err != nil {
		return nil, err
	}
	var req api.JobStabilityRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if req.JobID == "" {
		req.JobID = id
	}
	if req.JobID != id {
		return nil, badRequest("JobID %q in the body does not match %q in the path", req.JobID, id)
	}
	index, err := vs.JobStability(r.Context(), &structs.JobStabilityRequest{JobID: id, JobVersion: req.JobVersion, Stable: req.Stable})
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return &api.JobStabilityResponse{Index: index}, nil
}
