package http

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// nodePoolSubtree is the path prefix of the single-pool routes, routed by
// routeMux's pools mux.
const nodePoolSubtree = "/v1/node/pool/"

// NodePoolServer is what the node pool routes need from a server
// (*server.Server implements it), Nomad's node pools API:
//
//	GET         /v1/node/pools              every pool (?prefix=), blocking
//	PUT|POST    /v1/node/pools              {"NodePools": [...]}: create or replace
//	GET         /v1/node/pool/{name}        one pool, blocking
//	DELETE      /v1/node/pool/{name}        delete (not built-in, not in use)
//	GET         /v1/node/pool/{name}/nodes  the pool's nodes, blocking
//	GET         /v1/node/pool/{name}/jobs   the pool's jobs the token may read
//
// ACL (Nomad's node_pool policy mapped to GPUlayer's capabilities): reads
// need node read, writes operator write.
type NodePoolServer interface {
	NodePools(ctx context.Context, q *structs.QueryOptions) ([]*structs.NodePool, structs.QueryMeta, error)
	NodePoolGet(ctx context.Context, name string, q *structs.QueryOptions) (*structs.NodePool, structs.QueryMeta, error)
	NodePoolNodes(ctx context.Context, name string, q *structs.QueryOptions) ([]*structs.Node, structs.QueryMeta, error)
	NodePoolJobs(ctx context.Context, name string, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error)
	UpsertNodePools(ctx context.Context, pools []*structs.NodePool) (uint64, error)
	DeleteNodePool(ctx context.Context, name string) (uint64, error)
}

// nodePoolRoutes registers the node pool routes when the server
// implements NodePoolServer.
func (h *handler) nodePoolRoutes() {
	ps, ok := h.srv.(NodePoolServer)
	if !ok {
		return
	}
	h.handle("GET /v1/node/pools", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		pools, meta, err := ps.NodePools(r.Context(), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		return convert.NodePoolsFromStructs(pools), nil
	})
	upsert := func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		pools, err := h.decodeNodePools(w, r)
		if err != nil {
			return nil, err
		}
		index, err := ps.UpsertNodePools(r.Context(), pools)
		if err != nil {
			return nil, err
		}
		setIndex(w, index)
		return struct{}{}, nil
	}
	h.handle("PUT /v1/node/pools", upsert)
	h.handle("POST /v1/node/pools", upsert)
	h.handle("GET /v1/node/pool/{name}", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		p, meta, err := ps.NodePoolGet(r.Context(), r.PathValue("name"), q)
		if err != nil {
			setMetaOnError(w, meta)
			return nil, err
		}
		setMeta(w, meta)
		return convert.NodePoolFromStructs(p), nil
	})
	h.handle("DELETE /v1/node/pool/{name}", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		index, err := ps.DeleteNodePool(r.Context(), r.PathValue("name"))
		if err != nil {
			return nil, err
		}
		setIndex(w, index)
		return struct{}{}, nil
	})
	h.handle("GET /v1/node/pool/{name}/nodes", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		nodes, meta, err := ps.NodePoolNodes(r.Context(), r.PathValue("name"), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		out := make([]*api.NodeListStub, 0, len(nodes))
		for _, n := range nodes {
			out = append(out, convert.NodeListStub(n))
		}
		return out, nil
	})
	h.handle("GET /v1/node/pool/{name}/jobs", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		jobs, meta, err := ps.NodePoolJobs(r.Context(), r.PathValue("name"), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		jobs = visible(r, jobs, structs.NamespaceCapabilityListJobs, func(j *structs.Job) string { return j.Namespace })
		out := make([]*api.JobListStub, 0, len(jobs))
		for _, j := range jobs {
			out = append(out, convert.JobListStub(j, nil))
		}
		return out, nil
	})
}

// decodeNodePools reads a {"NodePools": [...]} body strictly: an unknown
// field, a null pool or a set SchedulerConfiguration (Nomad Enterprise's,
// which GPUlayer has not) is a 400 naming it.
func (h *handler) decodeNodePools(w http.ResponseWriter, r *http.Request) ([]*structs.NodePool, error) {
	var req api.NodePoolUpsertRequest
	raw, err := h.decodeBodyRaw(w, r, &req)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&api.NodePoolUpsertRequest{}); err != nil {
		return nil, badRequest("node pools body: %v", err)
	}
	if len(req.NodePools) == 0 {
		return nil, badRequest("request body has no NodePools; want {\"NodePools\": [{\"Name\": ...}]}")
	}
	if len(req.NodePools) > structs.MaxNodePoolsPerRequest {
		return nil, badRequest("NodePools: at most %d pools per request, got %d", structs.MaxNodePoolsPerRequest, len(req.NodePools))
	}
	out := make([]*structs.NodePool, 0, len(req.NodePools))
	for i, p := range req.NodePools {
		if p == nil {
			return nil, badRequest("NodePools[%d]: must not be null", i)
		}
		if sc := p.SchedulerConfiguration; sc != nil && (sc.SchedulerAlgorithm != "" || sc.MemoryOversubscriptionEnabled != nil) {
			return nil, badRequest("NodePools[%d].SchedulerConfiguration: not supported by GPUlayer (a per-pool scheduler configuration is Nomad Enterprise's)", i)
		}
		out = append(out, convert.NodePoolToStructs(p))
	}
	return out, nil
}
