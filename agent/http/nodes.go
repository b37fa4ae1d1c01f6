package http

import (
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
)

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
	out := make([]*api.NodeListStub, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			out = append(out, convert.NodeListStub(n))
		}
	}
	return out, nil
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
	return convert.NodeRead(node), nil
}
