package http

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

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
	if node.HTTPAddr == "" {
		return nil, fmt.Errorf("node %q has no HTTP address to read endpoints from: %w", node.ID, structs.ErrNotFound)
	}
	base, err := h.peers.nodeURL(node.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("node %q HTTP address %q: %w: %v", node.ID, node.HTTPAddr, structs.ErrInvalid, err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), statsProxyTimeout)
	defer cancel()
	target := strings.TrimSuffix(base.String(), "/") + "/v1/client/endpoints?node_id=" + url.QueryEscape(node.ID) + "&namespace=" + url.QueryEscape(ns)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("proxy endpoints to node %q: %w", node.ID, err)
	}
	// The node's agent gets the node's secret, never the caller's token
	// (node_proxy.go): the caller's read-job right was checked here.
	if req.Header, err = h.nodeProxyHeader(r, node.ID); err != nil {
		return nil, err
	}
	resp, err := h.peers.node.Do(req)
	if err != nil {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("read endpoints of node %q at %s: %v", node.ID, node.HTTPAddr, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, endpointsProxyLimit))
	if err != nil {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("read endpoints of node %q: %v", node.ID, err)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("node %q answered %s: %.200s", node.ID, resp.Status, body)}
	}
	var out []*api.ClientEndpoint
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("node %q sent bad endpoints: %v", node.ID, err)}
	}
	return out, nil
}
