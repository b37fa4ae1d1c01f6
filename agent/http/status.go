package http

import (
	"net/http"

	"github.com/gpulayer/gpulayer/structs"
)

// statusLeader handles GET /v1/status/leader: the leader's Raft address as
// a JSON string, "" when there is none.
func (h *handler) statusLeader(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	return h.srv.Leader(), nil
}

// statusPeers handles GET /v1/status/peers: the servers' Raft addresses.
func (h *handler) statusPeers(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	return nonNil(h.srv.Peers()), nil
}

// healthResponse is the body of /v1/status/health.
type healthResponse struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// statusHealth handles GET /v1/status/health: 200 {"ok": true} when the
// cluster has a leader, else 503 {"ok": false, "error": "no cluster leader"}.
// It is the one route that stays open once ACLs are on.
func (h *handler) statusHealth(w http.ResponseWriter, r *http.Request) {
	if h.srv.Leader() == "" {
		writeJSON(w, http.StatusServiceUnavailable, healthResponse{Error: structs.ErrNoLeader.Error()})
		return
	}
	writeJSON(w, http.StatusOK, healthResponse{OK: true})
}
