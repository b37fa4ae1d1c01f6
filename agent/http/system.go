package http

import (
	"context"
	"net/http"

	"github.com/gpulayer/gpulayer/server"
)

// GCServer is what the system routes need from a server; *server.Server
// implements it. When Config.Server implements GCServer, the handler
// serves
//
//	PUT  /v1/system/gc   collect garbage now, every threshold at zero (Nomad's route); leader
//	POST /v1/system/gc   the same (Nomad accepts both methods for its writes)
//
// which answers with the counts chosen for removal (server.GCResult:
// Evals, Allocs, Jobs, Nodes).
type GCServer interface {
	// SystemGC collects garbage now. It returns errors wrapping
	// structs.ErrNotLeader or structs.ErrShutdown.
	SystemGC(ctx context.Context) (*server.GCResult, error)
}

// systemRoutes registers the system routes when the server implements
// GCServer.
func (h *handler) systemRoutes() {
	gs, ok := h.srv.(GCServer)
	if !ok {
		return
	}
	gc := func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		return gs.SystemGC(r.Context())
	}
	h.handle("PUT /v1/system/gc", gc)
	h.handle("POST /v1/system/gc", gc)
}

var _ GCServer = (*server.Server)(nil)
