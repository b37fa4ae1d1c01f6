package http

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/gpulayer/gpulayer/structs"
)

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
	var st structs.NodeDeviceStats
	if err := h.nodeGetJSON(r, node, "/v1/client/stats?node_id="+url.QueryEscape(node.ID), "telemetry", 4<<20, false, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
