package http

import (
	"net/http"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// ReadinessReporter is implemented by servers that know whether their state
// has caught up with the cluster's since they started; *server.Server does.
type ReadinessReporter interface {
	// Ready returns nil once the server may answer stale reads from its
	// own state, else an error wrapping structs.ErrNotReady saying why.
	Ready() error
}

var _ ReadinessReporter = (*server.Server)(nil)

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
// cluster has a leader and this server's state has caught up since it
// started (ReadinessReporter), else 503 {"ok": false, "error": "no cluster
// leader"} or the reason it is not ready.
// It is the one route that stays open once ACLs are on.
func (h *handler) statusHealth(w http.ResponseWriter, r *http.Request) {
	if h.srv.Leader() == "" {
		writeJSON(w, http.StatusServiceUnavailable, healthResponse{Error: structs.ErrNoLeader.Error()})
		return
	}
	if rr, ok := h.srv.(ReadinessReporter); ok {
		if err := rr.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, healthResponse{Error: err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, healthResponse{OK: true})
}
