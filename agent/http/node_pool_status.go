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
// ACL: node read, as the other pool reads; a Waiting line naming a job
// shows only to a token that may list its namespace's jobs.
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
		return convert.NodePoolStatusFromStructs(waitingVisible(r, st)), nil
	})
}

// waitingVisible returns st without the Waiting lines that name a job of
// a namespace the caller may not list jobs of (the pool's jobs route hides
// those jobs the same way); lines naming no job stay. st itself is not
// changed: the copy is shallow but for Waiting.
func waitingVisible(r *http.Request, st *structs.NodePoolStatus) *structs.NodePoolStatus {
	if st == nil || len(st.Waiting) == 0 {
		return st
	}
	acl, _ := aclFrom(r)
	if acl.IsManagement() {
		return st
	}
	c := *st
	c.Waiting = make([]structs.PoolWait, 0, len(st.Waiting))
	for _, w := range st.Waiting {
		if w.Namespace == "" || acl.AllowNamespaceOp(w.Namespace, structs.NamespaceCapabilityListJobs) {
			c.Waiting = append(c.Waiting, w)
		}
	}
	return &c
}
