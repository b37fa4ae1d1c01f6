package http

import "net/http"

// nodeList handles GET /v1/nodes (?prefix, blocking).
func (h *handler) nodeList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	nodes, meta, err := h.srv.NodeList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return nonNil(nodes), nil
}

// nodeGet handles GET /v1/node/{id} (blocking).
func (h *handler) nodeGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	node, meta, err := h.srv.NodeGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return node, nil
}
