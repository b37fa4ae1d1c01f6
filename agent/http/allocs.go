package http

import (
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// allocList handles GET /v1/allocations (?prefix, blocking).
func (h *handler) allocList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	allocs, meta, err := h.srv.AllocList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	allocs = visible(r, allocs, structs.NamespaceCapabilityReadJob, allocNamespace)
	return h.allocStubs(allocs), nil
}

// allocStubs returns the allocations without their Job, as Nomad's list
// routes return AllocListStubs: a list of thousands of allocations would
// otherwise repeat the whole job spec in every entry. GET
// /v1/allocation/{id} still carries the job.
func (h *handler) allocStubs(allocs []*structs.Allocation) []*api.Allocation {
	out := make([]*api.Allocation, len(allocs))
	for i, a := range allocs {
		out[i] = convert.AllocRead(a, h.region, false)
	}
	return out
}

// allocGet handles GET /v1/allocation/{id} (blocking).
func (h *handler) allocGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	alloc, meta, err := h.srv.AllocGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return convert.AllocRead(alloc, h.region, true), nil
}
