package http

import "net/http"

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
	return nonNil(allocs), nil
}

// allocGet handles GET /v1/allocation/{id} (blocking).
func (h *handler) allocGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	alloc, meta, err := h.srv.AllocGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return alloc, nil
}
