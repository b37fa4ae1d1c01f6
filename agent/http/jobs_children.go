package http

import (
	"context"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server"
)

// ChildrenServer is what the periodic and parameterized job routes need
// from a server; *server.Server implements it. When Config.Server
// implements it, the handler serves (Nomad's routes and shapes)
//
//	PUT|POST /v1/job/{id}/dispatch        {Payload (base64), Meta, IdempotencyToken} -> DispatchedJobID, EvalID, EvalCreateIndex, JobCreateIndex; leader
//	PUT|POST /v1/job/{id}/periodic/force  -> EvalID, EvalCreateIndex; leader
//
// A job's children are listed by GET /v1/jobs?prefix=<id>/ (as Nomad's CLI
// does); each has ParentID set.
type ChildrenServer interface {
	// JobDispatch dispatches a parameterized job; see server.JobDispatch.
	JobDispatch(ctx context.Context, req *server.JobDispatchRequest) (*server.JobDispatchResponse, error)
	// PeriodicForce launches a periodic job now; see server.PeriodicForce.
	PeriodicForce(ctx context.Context, jobID string) (*server.PeriodicForceResponse, error)
}

// childrenRoutes registers the dispatch and periodic force routes when the
// server implements ChildrenServer.
func (h *handler) childrenRoutes() {
	cs, ok := h.srv.(ChildrenServer)
	if !ok {
		return
	}
	dispatch := func(w http.ResponseWriter, r *http.Request) (interface{}, error) { return h.jobDispatch(cs, w, r) }
	force := func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		resp, err := cs.PeriodicForce(r.Context(), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		setIndex(w, resp.Index)
		return resp, nil
	}
	h.handle("PUT /v1/job/{id}/dispatch", dispatch)
	h.handle("POST /v1/job/{id}/dispatch", dispatch)
	h.handle("PUT /v1/job/{id}/periodic/force", force)
	h.handle("POST /v1/job/{id}/periodic/force", force)
}

// jobDispatch handles PUT|POST /v1/job/{id}/dispatch. The idempotency
// token comes from the body or, as Nomad's Go client sends it
// (WriteOptions.IdempotencyToken), from ?idempotency_token=.
func (h *handler) jobDispatch(cs ChildrenServer, w http.ResponseWriter, r *http.Request) (interface{}, error) {
	var req api.JobDispatchRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if req.JobID != "" && req.JobID != id {
		return nil, badRequest("JobID: %q in the body differs from %q in the path", req.JobID, id)
	}
	if req.IdPrefixTemplate != "" {
		return nil, badRequest("IdPrefixTemplate: not supported; dispatched jobs are named <job>/dispatch-<unix>-<hex>")
	}
	token := req.IdempotencyToken
	if q := r.URL.Query().Get("idempotency_token"); q != "" {
		if token != "" && token != q {
			return nil, badRequest("IdempotencyToken: the body's differs from ?idempotency_token=")
		}
		token = q
	}
	resp, err := cs.JobDispatch(r.Context(), &server.JobDispatchRequest{JobID: id, Payload: req.Payload, Meta: req.Meta, IdempotencyToken: token})
	if err != nil {
		return nil, err
	}
	setIndex(w, resp.Index)
	return &api.JobDispatchResponse{DispatchedJobID: resp.DispatchedJobID, EvalID: resp.EvalID, EvalCreateIndex: resp.EvalCreateIndex,
		JobCreateIndex: resp.JobCreateIndex, Index: resp.Index}, nil
}
