package http

import (
	"context"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// NodePoolStatusServer is what the pool status route needs from a server
// (*server.Server implements it):
//
//	GET /v1/node/pool/{name}/status  nodes (idle, busy, draining, down,
//	                                 joining), pending provision requests,
//	                                 last decisions, failed provider calls;
//	                                 blocking
//
// ACL: node read, as the other pool reads.
type NodePoolStatusServer interface {
	NodePoolStatus(ctx context.Context, name string, q *structs.QueryOptions) (*structs.NodePoolStatus, structs.QueryMeta, error)
}

// nodePoolStatusRoutes registers the pool status route when the server
// implements NodePoolStatusServer.
func (h *handler) nodePoolStatusRoutes() {
	ps, ok := h.srv.(NodePoolStatusServer)
	if !ok {
		return
	}
	h.handle("GET /v1/node/pool/{name}/status", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		st, meta, err := ps.NodePoolStatus(r.Context(), r.PathValue("name"), q)
		if err != nil {
			setMetaOnError(w, meta)
			return nil, err
		}
		setMeta(w, meta)
		return convert.NodePoolStatusFromStructs(st), nil
	})
}
