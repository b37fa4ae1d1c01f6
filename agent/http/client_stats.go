package http

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// statsProxyTimeout bounds a telemetry read proxied to another node's
// agent: telemetry is a nicety, a slow node must not hold a page.
const statsProxyTimeout = 3 * time.Second

// clientStats handles GET /v1/client/stats (?node_id=): the latest GPU
// telemetry (structs.NodeDeviceStats) of the agent's own client, or, with
// node_id naming another node, of that node's agent (proxied to its
// HTTPAddr, like logs). Errors: 404 when there is no such client or node.
func (h *handler) clientStats(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	nodeID := r.URL.Query().Get("node_id")
	if ds, ok := h.client.(deviceStatser); ok && h.client != nil {
		if st := ds.DeviceStats(); st != nil && (nodeID == "" || st.NodeID == nodeID) {
			return st, nil
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
		return nil, fmt.Errorf("node %q has no HTTP address to read telemetry from: %w", node.ID, structs.ErrNotFound)
	}
	return h.proxyStats(r, node)
}

// proxyStats reads /v1/client/stats from the node's agent.
func (h *handler) proxyStats(r *http.Request, node *structs.Node) (*structs.NodeDeviceStats, error) {
	base, err := h.peers.nodeURL(node.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("node %q HTTP address %q: %w: %v", node.ID, node.HTTPAddr, structs.ErrInvalid, err)
	}
	addr := base.String()
	ctx, cancel := context.WithTimeout(r.Context(), statsProxyTimeout)
	defer cancel()
	target := strings.TrimSuffix(addr, "/") + "/v1/client/stats?node_id=" + url.QueryEscape(node.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("proxy telemetry to node %q: %w", node.ID, err)
	}
	// The node's agent gets the node's secret, never the caller's token
	// (node_proxy.go): the caller's node read right was checked here.
	if req.Header, err = h.nodeProxyHeader(r, node.ID); err != nil {
		return nil, err
	}
	resp, err := h.peers.node.Do(req)
	if err != nil {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("read telemetry of node %q at %s: %v", node.ID, node.HTTPAddr, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("read telemetry of node %q: %v", node.ID, err)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("node %q answered %s: %.200s", node.ID, resp.Status, body)}
	}
	var st structs.NodeDeviceStats
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("node %q sent bad telemetry: %v", node.ID, err)}
	}
	return &st, nil
}
