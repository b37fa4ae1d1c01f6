package http

import "net/http"

// evalGet handles GET /v1/evaluation/{id} (blocking).
func (h *handler) evalGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	eval, meta, err := h.srv.EvalGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return eval, nil
}
