package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// NodeServer is what the node routes need from a server: the calls a client
// agent on another host makes over HTTP (the in-process client of a dev
// agent calls the same methods directly). *server.Server implements it.
// When Config.Server implements NodeServer too, the handler serves
//
//	PUT  /v1/node/register               register (body NodeRegisterHTTPRequest)
//	PUT  /v1/node/{id}/heartbeat         heartbeat (body NodeHeartbeatHTTPRequest)
//	GET  /v1/node/{id}/allocations       the node's allocations (blocking query)
//	POST /v1/node/{id}/allocations       client status of allocations (body NodeUpdateAllocsHTTPRequest)
//
// each authenticated by the node's secret in the X-Gpulayer-Node-Secret
// header (structs.HeaderNodeSecret).
type NodeServer interface {
	// NodeRegister creates or updates the node and returns its heartbeat TTL.
	NodeRegister(ctx context.Context, node *structs.Node) (time.Duration, error)
	// NodeUpdateStatus is the heartbeat; it returns the next TTL.
	NodeUpdateStatus(ctx context.Context, nodeID, status string) (time.Duration, error)
	// NodeAllocations is the blocking query on the node's allocations.
	NodeAllocations(ctx context.Context, nodeID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error)
	// UpdateAllocs records client-side allocation status.
	UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error
	// AuthorizeNode returns nil when secret is the node's stored SecretID,
	// an error wrapping structs.ErrNotFound for an unknown node and one
	// wrapping structs.ErrPermissionDenied for a wrong secret.
	AuthorizeNode(nodeID, secret string) error
}

// GPUHeartbeatServer takes the GPU samples a heartbeat carries
// (NodeHeartbeatHTTPRequest.GPUs, validated): *server.Server implements
// it. A NodeServer without it gets the heartbeat and the samples are
// dropped.
type GPUHeartbeatServer interface {
	NodeHeartbeatGPUs(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (time.Duration, error)
}

// NodeChangesServer is what the client-only allocation change routes need
// (Nomad's Node.GetClientAllocs and Alloc.GetAllocs): *server.Server
// implements it. When Config.Server implements it too, the handler serves
//
//	GET  /v1/node/{id}/client-allocs        allocation ID -> AllocModifyIndex (blocking query)
//	POST /v1/node/{id}/client-allocs/fetch  the named allocations, each job version once
//
// authenticated by the node's secret like the other node routes. The
// public GET /v1/node/{id}/allocations keeps its shape.
type NodeChangesServer interface {
	// NodeClientAllocs is the blocking query on the node's allocation
	// IDs and their AllocModifyIndex.
	NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error)
	// NodeFetchAllocs returns the named allocations of the node.
	NodeFetchAllocs(ctx context.Context, nodeID string, ids []string, q *structs.QueryOptions) (*structs.NodeFetchAllocsHTTPResponse, structs.QueryMeta, error)
}

// NodeClientAllocsWaiter is implemented by servers whose
// NodeClientAllocs blocking query can be waited on outside it (a Parker
// parks the connection meanwhile): NodeClientAllocsWait returns nil when
// the query would answer at once.
type NodeClientAllocsWaiter interface {
	NodeClientAllocsWait(ctx context.Context, nodeID string, q *structs.QueryOptions) (*server.QueryWait, error)
}

// StateHasher is implemented by servers that can report a digest of their
// state store, served at GET /v1/operator/state-hash so tests and operators
// can check that every server's FSM holds the same state.
type StateHasher interface {
	// StateHash returns the hex SHA-256 of the state store's content and
	// the highest Raft index applied to it.
	StateHash() (hash string, index uint64, err error)
}

// StateHashResponse is the body of GET /v1/operator/state-hash.
type StateHashResponse struct {
	// Hash is the hex SHA-256 of the server's state store content.
	Hash string
	// Index is the highest Raft index the server has applied.
	Index uint64
}

// nodeRoutes registers the node routes when the server implements
// NodeServer, and the state hash route when it implements StateHasher.
func (h *handler) nodeRoutes() {
	if ns, ok := h.srv.(NodeServer); ok {
		n := &nodeRoutes{h: h, ns: ns}
		n.handle("PUT /v1/node/register", n.register)
		n.handle("PUT /v1/node/{id}/heartbeat", n.heartbeat)
		n.handle("GET /v1/node/{id}/allocations", n.allocations)
		n.handle("POST /v1/node/{id}/allocations", n.updateAllocs)
		if cs, ok := h.srv.(NodeChangesServer); ok {
			n.cs = cs
			n.handle("GET /v1/node/{id}/client-allocs", n.clientAllocs)
			n.handle("POST /v1/node/{id}/client-allocs/fetch", n.fetchAllocs)
		}
	}
	if sh, ok := h.srv.(StateHasher); ok {
		h.handle("GET /v1/operator/state-hash", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
			hash, idx, err := sh.StateHash()
			if err != nil {
				return nil, err
			}
			setIndex(w, idx)
			return StateHashResponse{Hash: hash, Index: idx}, nil
		})
	}
}

// clientOnlyRoutes registers the routes of an agent that runs a client and
// no server: its own tasks' logs, /v1/agent/self and /v1/status/health.
func (h *handler) clientOnlyRoutes() {
	h.mux.HandleFunc("GET /v1/client/fs/logs/{alloc}", h.clientOnlyLogs)
	// Check results of this agent's allocations (services.go).
	h.checkRoutes()
	// Endpoint routers of this agent's client (issue 14).
	h.clientEndpointRoutes()
	// Signal, restart and exec of this agent's own allocations: the
	// servers proxy them here (alloc_actions.go onAllocNode).
	h.mux.HandleFunc("POST /v1/allocation/{id}/signal", h.onLocalAlloc(h.allocSignal))
	h.mux.HandleFunc("POST /v1/allocation/{id}/restart", h.onLocalAlloc(h.allocRestart))
	h.mux.HandleFunc("POST /v1/allocation/{id}/exec", h.onLocalAlloc(h.allocExec))
	// Nomad's paths of the same actions (issue 12).
	h.mux.HandleFunc("PUT /v1/client/allocation/{id}/signal", h.onLocalAlloc(h.allocSignal))
	h.mux.HandleFunc("PUT /v1/client/allocation/{id}/restart", h.onLocalAlloc(h.allocRestart))
	h.mux.HandleFunc("GET /v1/client/allocation/{id}/exec", h.onLocalAlloc(h.allocExecWS))
	h.handle("GET /v1/agent/self", h.clientOnlySelf)
	h.mux.HandleFunc("GET /v1/status/health", func(w http.ResponseWriter, r *http.Request) {
		if n := h.client.Node(); n == nil {
			writeJSON(w, http.StatusServiceUnavailable, healthResponse{Error: "client node not registered"})
			return
		}
		writeJSON(w, http.StatusOK, healthResponse{OK: true})
	})
}

// clientOnlyLogs handles GET /v1/client/fs/logs/{alloc} on a client-only
// agent: without a server to look the allocation up, the task parameter
// is required and only this agent's allocations are served.
func (h *handler) clientOnlyLogs(w http.ResponseWriter, r *http.Request) {
	lr, err := parseLogsRequest(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if lr.task == "" {
		h.writeError(w, r, badRequest("task parameter is required on an agent without a server"))
		return
	}
	h.streamLocal(w, r, lr, nil)
}

// clientOnlySelf handles GET /v1/agent/self on a client-only agent: the
// same shape as agentSelf, with only "client" stats.
func (h *handler) clientOnlySelf(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	return h.agentSelf(w, r)
}

// nodeRoutes holds the node route handlers.
type nodeRoutes struct {
	h  *handler
	ns NodeServer
	// cs serves the allocation change routes; nil when the server lacks
	// them.
	cs NodeChangesServer
}

// authorize checks the node secret header for nodeID. A missing header is
// a 403 like a wrong secret; an unknown node is a 404 so its client
// registers again.
func (n *nodeRoutes) authorize(r *http.Request, nodeID string) error {
	secret := r.Header.Get(structs.HeaderNodeSecret)
	if secret == "" {
		return fmt.Errorf("node %s: %w: missing %s header", nodeID, structs.ErrPermissionDenied, structs.HeaderNodeSecret)
	}
	return n.ns.AuthorizeNode(nodeID, secret)
}

// register handles PUT /v1/node/register. A node registering for the first
// time sets its secret; re-registering needs the same secret (in the body;
// the header, when sent, must agree).
func (n *nodeRoutes) register(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	var req structs.NodeRegisterHTTPRequest
	if err := n.decode(w, r, &req); err != nil {
		return nil, err
	}
	switch {
	case req.Node == nil:
		return nil, badRequest("Node: missing; want {\"Node\": {...}, \"SecretID\": \"...\"}")
	case req.Node.ID == "":
		return nil, badRequest("Node.ID: must not be empty")
	case req.SecretID == "":
		return nil, badRequest("SecretID: must not be empty")
	}
	if hs := r.Header.Get(structs.HeaderNodeSecret); hs != "" && hs != req.SecretID {
		return nil, badRequest("SecretID: differs from the %s header", structs.HeaderNodeSecret)
	}
	if err := n.ns.AuthorizeNode(req.Node.ID, req.SecretID); err != nil && !errors.Is(err, structs.ErrNotFound) {
		return nil, err
	}
	node := req.Node.Copy()
	node.SecretID = req.SecretID
	ttl, err := n.ns.NodeRegister(r.Context(), node)
	if err != nil {
		return nil, err
	}
	return structs.NodeHeartbeatHTTPResponse{HeartbeatTTL: ttl}, nil
}

// heartbeat handles PUT /v1/node/{id}/heartbeat.
func (n *nodeRoutes) heartbeat(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	// The secret first: the body of a caller that is not the node is
	// never decoded (see updateAllocs).
	if err := n.authorize(r, id); err != nil {
		return nil, err
	}
	var req structs.NodeHeartbeatHTTPRequest
	if err := n.decode(w, r, &req); err != nil {
		return nil, err
	}
	if req.Status == "" {
		return nil, badRequest("Status: must not be empty")
	}
	if err := structs.ValidateGPUUsage(req.GPUs); err != nil {
		return nil, err // wraps structs.ErrInvalid: 400 naming the field
	}
	var ttl time.Duration
	var err error
	if gs, ok := n.ns.(GPUHeartbeatServer); ok {
		ttl, err = gs.NodeHeartbeatGPUs(r.Context(), id, req.Status, req.GPUs)
	} else {
		ttl, err = n.ns.NodeUpdateStatus(r.Context(), id, req.Status)
	}
	if err != nil {
		return nil, err
	}
	return structs.NodeHeartbeatHTTPResponse{HeartbeatTTL: ttl}, nil
}

// allocations handles GET /v1/node/{id}/allocations (blocking). Every
// allocation placed on the node is returned with its job.
func (n *nodeRoutes) allocations(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	if err := n.authorize(r, id); err != nil {
		return nil, err
	}
	allocs, meta, err := n.ns.NodeAllocations(r.Context(), id, q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return nonNil(allocs), nil
}

// clientAllocs handles GET /v1/node/{id}/client-allocs (blocking): the
// node's allocation IDs and AllocModifyIndex, no allocation bodies.
func (n *nodeRoutes) clientAllocs(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	if err := n.authorize(r, id); err != nil {
		return nil, err
	}
	if resumedRequest(r) {
		// The wait is over (park.go): answer what there is now.
		q.MaxQueryTime = time.Nanosecond
	} else if wt, ok := n.cs.(NodeClientAllocsWaiter); ok && n.h.parker != nil && q.MinQueryIndex > 0 {
		wait, err := wt.NodeClientAllocsWait(r.Context(), id, q)
		if err != nil {
			return nil, err
		}
		if wait != nil {
			if n.h.parker.park(w, r, wait) {
				return nil, errParked
			}
			wait.Release()
		}
	}
	allocs, meta, err := n.cs.NodeClientAllocs(r.Context(), id, q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	if allocs == nil {
		allocs = map[string]uint64{}
	}
	return structs.NodeClientAllocsHTTPResponse{Allocs: allocs}, nil
}

// fetchAllocs handles POST /v1/node/{id}/client-allocs/fetch (body
// structs.NodeFetchAllocsHTTPRequest): the named allocations of the node,
// without their jobs, each job version once.
func (n *nodeRoutes) fetchAllocs(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	if err := n.authorize(r, id); err != nil {
		return nil, err
	}
	var req structs.NodeFetchAllocsHTTPRequest
	if err := n.decode(w, r, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	out, meta, err := n.cs.NodeFetchAllocs(r.Context(), id, req.AllocIDs, q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return out, nil
}

// updateAllocs handles POST /v1/node/{id}/allocations. Every allocation in
// the body must name this node (or leave NodeID empty): a client reports
// only its own allocations.
func (n *nodeRoutes) updateAllocs(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	// The secret before the body: a 1 MiB body of empty msgpack maps
	// decodes into about a million Allocations (some 450 MiB), which
	// only the node itself may make the server build.
	if err := n.authorize(r, id); err != nil {
		return nil, err
	}
	var req structs.NodeUpdateAllocsHTTPRequest
	if err := n.decode(w, r, &req); err != nil {
		return nil, err
	}
	for i, a := range req.Allocs {
		switch {
		case a == nil:
			return nil, badRequest("Allocs[%d]: must not be null", i)
		case a.ID == "":
			return nil, badRequest("Allocs[%d].ID: must not be empty", i)
		case a.NodeID != "" && a.NodeID != id:
			return nil, badRequest("Allocs[%d].NodeID: %q is not node %q", i, a.NodeID, id)
		}
	}
	// A node may only report allocations placed on it. This runs on the
	// leader (the route is forwarded), whose state holds every committed
	// allocation once it is ready (a leader still applying the log answers
	// 503, so the client keeps the update and retries). An allocation the
	// ready leader does not know is a 404 naming it, never a silent 200.
	own := make([]*structs.Allocation, 0, len(req.Allocs))
	var unknown []string
	for i, a := range req.Allocs {
		stored, _, err := n.h.srv.AllocGet(r.Context(), a.ID, &structs.QueryOptions{AllowStale: true})
		if errors.Is(err, structs.ErrNotFound) {
			unknown = append(unknown, a.ID)
			continue
		}
		if err != nil {
			return nil, err
		}
		if stored.ID != a.ID || stored.NodeID != id {
			return nil, fmt.Errorf("allocation %q (Allocs[%d]) is not on node %q: %w", a.ID, i, id, structs.ErrPermissionDenied)
		}
		own = append(own, a)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("update allocations: unknown allocations %q (nothing was applied): %w", unknown, structs.ErrNotFound)
	}
	if err := n.ns.UpdateAllocs(r.Context(), own); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// onLocalAlloc serves an allocation action on a client-only agent, which
// has no state to look the allocation up in: only an allocation this
// agent's client runs is acted on; any other is a 404.
func (h *handler) onLocalAlloc(fn func(w http.ResponseWriter, r *http.Request, actor allocActor, alloc *structs.Allocation)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		actor, ok := h.client.(allocActor)
		an, ok2 := h.client.(allocNamespacer)
		if !ok || !ok2 {
			h.writeError(w, r, fmt.Errorf("%w: this agent's client cannot act on allocations", structs.ErrInvalid))
			return
		}
		if _, known := an.AllocNamespace(id); !known {
			if strings.HasSuffix(r.URL.Path, "/exec") {
				discardExecBody(w, r)
			}
			h.writeError(w, r, fmt.Errorf("allocation %q does not run on this agent's node: %w", id, structs.ErrNotFound))
			return
		}
		fn(w, r, actor, &structs.Allocation{ID: id})
	}
}
