package http

import (
	"maps"
	"net/http"
)

// agentSelf handles GET /v1/agent/self: Config.Self's map (copied) with
// "stats" set to the server's statistics under "server" and the client's
// node ID under "client" when the agent runs one.
func (h *handler) agentSelf(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	out := map[string]interface{}{}
	if h.self != nil {
		maps.Copy(out, h.self())
	}
	stats := map[string]interface{}{"server": h.srv.Stats()}
	if h.client != nil {
		if n := h.client.Node(); n != nil {
			stats["client"] = map[string]string{"node_id": n.ID, "node_name": n.Name}
		}
	}
	if _, ok := out["stats"]; !ok {
		out["stats"] = stats
	}
	return out, nil
}
