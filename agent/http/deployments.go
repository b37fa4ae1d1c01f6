package http

import (
	"context"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// DeploymentServer is the part of a server that runs deployments; the
// agent's *server.Server has it.
type DeploymentServer interface {
	DeploymentList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Deployment, structs.QueryMeta, error)
	DeploymentGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Deployment, structs.QueryMeta, error)
	JobDeployments(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Deployment, structs.QueryMeta, error)
	DeploymentAllocations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error)
	DeploymentPromote(ctx context.Context, args *structs.DeploymentPromoteArgs) (*structs.DeploymentUpdateResponse, error)
	DeploymentFail(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error)
	DeploymentPause(ctx context.Context, id string, pause bool) (*structs.DeploymentUpdateResponse, error)
	DeploymentSetAllocHealth(ctx context.Context, args *structs.DeploymentAllocHealthArgs) (*structs.DeploymentUpdateResponse, error)
}

// deploymentRoutes registers Nomad's deployment routes.
func (h *handler) deploymentRoutes() {
	h.handle("GET /v1/deployments", h.deploymentList)
	h.handle("GET /v1/deployment/{id}", h.deploymentGet)
	h.handle("GET /v1/deployment/allocations/{id}", h.deploymentAllocations)
	h.handle("GET /v1/job/{id}/deployments", h.jobDeployments)
	h.handle("GET /v1/job/{id}/deployment", h.jobLatestDeployment)
	for _, m := range []string{"PUT", "POST"} {
		h.handle(m+" /v1/deployment/promote/{id}", h.deploymentPromote)
		h.handle(m+" /v1/deployment/fail/{id}", h.deploymentFail)
		h.handle(m+" /v1/deployment/pause/{id}", h.deploymentPause)
		h.handle(m+" /v1/deployment/allocation-health/{id}", h.deploymentAllocHealth)
	}
}

func (h *handler) deploymentServer() (DeploymentServer, error) {
	ds, ok := h.srv.(DeploymentServer)
	if !ok {
		return nil, &codedError{code: http.StatusNotImplemented, msg: "this server does not run deployments"}
	}
	return ds, nil
}

// deploymentNamespace returns the namespace of the deployment in {id}
// ("" when unknown), for the route's ACL check.
func deploymentNamespace(d *structs.Deployment) string { return d.Namespace }

// deploymentList handles GET /v1/deployments (?prefix, blocking).
func (h *handler) deploymentList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	list, meta, err := ds.DeploymentList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	list = visible(r, list, structs.NamespaceCapabilityReadJob, deploymentNamespace)
	return convert.DeploymentsFromStructs(list), nil
}

// deploymentGet handles GET /v1/deployment/{id} (blocking).
func (h *handler) deploymentGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	d, meta, err := ds.DeploymentGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return convert.DeploymentFromStructs(d), nil
}

// deploymentAllocations handles GET /v1/deployment/allocations/{id}.
func (h *handler) deploymentAllocations(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	allocs, meta, err := ds.DeploymentAllocations(r.Context(), r.PathValue("id"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return h.allocStubs(allocs), nil
}

// jobDeployments handles GET /v1/job/{id}/deployments (newest first).
func (h *handler) jobDeployments(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	list, err := h.visibleJobDeployments(w, r)
	if err != nil {
		return nil, err
	}
	return convert.DeploymentsFromStructs(list), nil
}

// jobLatestDeployment handles GET /v1/job/{id}/deployment: the newest
// deployment, or null when the job has none (as Nomad).
func (h *handler) jobLatestDeployment(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	list, err := h.visibleJobDeployments(w, r)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return convert.DeploymentFromStructs(list[0]), nil
}

// visibleJobDeployments reads the {id} job's deployments, newest first
// (blocking), and sets the query meta. A job keyed by ID may have moved
// namespace: its deployments made in another one are kept only for callers
// that may read that one.
func (h *handler) visibleJobDeployments(w http.ResponseWriter, r *http.Request) ([]*structs.Deployment, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	list, meta, err := ds.JobDeployments(r.Context(), r.PathValue("id"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return visible(r, list, structs.NamespaceCapabilityReadJob, deploymentNamespace), nil
}

// deploymentIDFromBody checks that a body's DeploymentID, when set,
// matches {id}.
func deploymentIDFromBody(r *http.Request, body string) (string, error) {
	id := r.PathValue("id")
	if body != "" && body != id {
		return "", badRequest("DeploymentID %q in the body does not match %q in the path", body, id)
	}
	return id, nil
}

func writeDeploymentResponse(w http.ResponseWriter, resp *structs.DeploymentUpdateResponse) *api.DeploymentUpdateResponse {
	setIndex(w, resp.Index)
	return &api.DeploymentUpdateResponse{EvalID: resp.EvalID, EvalCreateIndex: resp.EvalCreateIndex,
		DeploymentModifyIndex: resp.DeploymentModifyIndex, RevertedJobVersion: resp.RevertedJobVersion, Index: resp.Index}
}

// deploymentPromote handles PUT /v1/deployment/promote/{id} with
// {"DeploymentID", "All", "Groups"}.
func (h *handler) deploymentPromote(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	var req api.DeploymentPromoteRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	id, err := deploymentIDFromBody(r, req.DeploymentID)
	if err != nil {
		return nil, err
	}
	resp, err := ds.DeploymentPromote(r.Context(), &structs.DeploymentPromoteArgs{DeploymentID: id, All: req.All, Groups: req.Groups})
	if err != nil {
		return nil, err
	}
	return writeDeploymentResponse(w, resp), nil
}

// deploymentFail handles PUT /v1/deployment/fail/{id}.
func (h *handler) deploymentFail(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	var req api.DeploymentFailRequest
	if r.ContentLength != 0 {
		if err := h.decodeBody(w, r, &req); err != nil {
			return nil, err
		}
	}
	id, err := deploymentIDFromBody(r, req.DeploymentID)
	if err != nil {
		return nil, err
	}
	resp, err := ds.DeploymentFail(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return writeDeploymentResponse(w, resp), nil
}

// deploymentPause handles PUT /v1/deployment/pause/{id} with
// {"DeploymentID", "Pause"}.
func (h *handler) deploymentPause(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	var req api.DeploymentPauseRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	id, err := deploymentIDFromBody(r, req.DeploymentID)
	if err != nil {
		return nil, err
	}
	resp, err := ds.DeploymentPause(r.Context(), id, req.Pause)
	if err != nil {
		return nil, err
	}
	return writeDeploymentResponse(w, resp), nil
}

// deploymentAllocHealth handles PUT /v1/deployment/allocation-health/{id}
// with {"DeploymentID", "HealthyAllocationIDs", "UnhealthyAllocationIDs"}.
func (h *handler) deploymentAllocHealth(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	ds, err := h.deploymentServer()
	if err != nil {
		return nil, err
	}
	var req api.DeploymentAllocHealthRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	id, err := deploymentIDFromBody(r, req.DeploymentID)
	if err != nil {
		return nil, err
	}
	resp, err := ds.DeploymentSetAllocHealth(r.Context(), &structs.DeploymentAllocHealthArgs{DeploymentID: id,
		HealthyAllocationIDs: req.HealthyAllocationIDs, UnhealthyAllocationIDs: req.UnhealthyAllocationIDs})
	if err != nil {
		return nil, err
	}
	return writeDeploymentResponse(w, resp), nil
}
