package http

import (
	"maps"
	"net/http"
	"strings"
)

// agentSelf handles GET /v1/agent/self in the shape of Nomad's AgentSelf:
// "config" is Config.Self's map (copied), "member" this agent as a
// cluster member, and "stats" string maps per subsystem: "nomad" (the
// server's broker, plan queue and leadership figures), "raft" (the Raft
// library's statistics) and, when the agent runs a client, "client"
// (node_id, node_name). Config.Self's keys also stay at the top level for
// older GPUlayer clients, except a "Stats" key (it would collide with
// "stats" in a case-insensitive decoder such as Go's).
func (h *handler) agentSelf(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	cfg := map[string]interface{}{}
	if h.self != nil {
		maps.Copy(cfg, h.self())
	}
	delete(cfg, "Stats")
	delete(cfg, "stats")
	stats := map[string]map[string]string{}
	if h.srv != nil {
		nomad, raft := map[string]string{"server": "true", "known_regions": "1"}, map[string]string{}
		for k, v := range h.srv.Stats() {
			if rest, ok := strings.CutPrefix(k, "raft."); ok {
				raft[rest] = v
			} else {
				nomad[k] = v
			}
		}
		nomad["leader_addr"] = h.srv.Leader()
		stats["nomad"], stats["raft"] = nomad, raft
	}
	if h.client != nil {
		if n := h.client.Node(); n != nil {
			stats["client"] = map[string]string{"node_id": n.ID, "node_name": n.Name}
		}
	}
	name, _ := cfg["Name"].(string)
	addr, _ := cfg["HTTPAddr"].(string)
	dc, _ := cfg["Datacenter"].(string)
	role := "client"
	if h.srv != nil {
		role = "nomad"
	}
	member := map[string]interface{}{
		"Name": name, "Addr": addr, "Status": "alive",
		"Tags": map[string]string{"region": h.region, "dc": dc, "role": role},
	}
	out := map[string]interface{}{}
	maps.Copy(out, cfg)
	out["config"], out["member"], out["stats"] = cfg, member, stats
	return out, nil
}
