package http

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// endpointStatuser is implemented by clients that run endpoint routers
// (*client.Client, agent/client/endpoints.go).
type endpointStatuser interface {
	Endpoints() []*structs.ClientEndpointStatus
}

// endpointsProxyLimit bounds a proxied endpoints answer.
const endpointsProxyLimit = 4 << 20

// clientEndpointRoutes registers GET /v1/client/endpoints (issue 14).
func (h *handler) clientEndpointRoutes() {
	h.handle("GET /v1/client/endpoints", h.clientEndpoints)
}

// clientEndpoints handles GET /v1/client/endpoints (?node_id=,
// ?namespace=): the endpoint routers of the agent's own client, each with
// its members' processes as the OS reports them now (pid, alive, RSS
// MiB), or, with node_id naming another node, that node's (proxied to its
// agent, like /v1/client/stats). Only the routers of the request's
// namespace are listed: the caller needs read-job there (routeACL), as
// for that namespace's allocations. Errors: 404 when there is no such
// client or node, 502 when the node's agent cannot be read.
func (h *handler) clientEndpoints(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	nodeID := r.URL.Query().Get("node_id")
	ns := nsOrDefault(r.URL.Query().Get("namespace"))
	if es, ok := h.client.(endpointStatuser); ok && h.client != nil {
		if n := h.client.Node(); nodeID == "" || (n != nil && n.ID == nodeID) {
			var mine []*structs.ClientEndpointStatus
			for _, e := range es.Endpoints() {
				if nsOrDefault(e.Namespace) == ns {
					mine = append(mine, e)
				}
			}
			return convert.ClientEndpointsRead(mine), nil
		}
	}
	if nodeID == "" {
		return nil, fmt.Errorf("this agent runs no client; name a node with ?node_id=: %w", structs.ErrNotFound)
	}
	if proxied(r) || h.srv == nil {
		return nil, fmt.Errorf("node %q is not this agent's client: %w", nodeID, structs.ErrNotFound)
	}
	node, _, err := h.srv.NodeGet(r.Context(), nodeID, &structs.QueryOptions{AllowStale: true})
	if err != nil {
		return nil, err
	}
	path := "/v1/client/endpoints?node_id=" + url.QueryEscape(node.ID) + "&namespace=" + url.QueryEscape(ns)
	var out []*api.ClientEndpoint
	if err := h.nodeGetJSON(r, node, path, "endpoints", endpointsProxyLimit, false, &out); err != nil {
		return nil, err
	}
	return out, nil
}
