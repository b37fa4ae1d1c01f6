package http

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// EvalLister is the part of a server that lists evaluations (GET
// /v1/evaluations, search); *server.Server has it. Optional: without it
// the route answers 501 and search finds no evaluations.
type EvalLister interface {
	EvalList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Evaluation, structs.QueryMeta, error)
}

// searchLimit is how many matches a search returns per context, as
// Nomad's prefix search: 20, with Truncations[context] true when more
// matched.
const searchLimit = 20

// wireRoutes registers the routes that exist for the Nomad API clients
// (issue 12, website/docs/nomad-compatibility.md): summaries, the
// evaluations list, search, regions, namespaces, and Nomad's methods and
// paths for parse and the allocation actions.
func (h *handler) wireRoutes() {
	h.handle("GET /v1/job/{id}/summary", h.jobSummary)
	h.handle("GET /v1/evaluations", h.evalList)
	h.handle("PUT /v1/search", h.search)
	h.handle("POST /v1/search", h.search)
	h.handle("GET /v1/regions", h.regions)
	h.handle("GET /v1/namespaces", h.namespaces)
	h.handle("GET /v1/namespace/{name}", h.namespaceGet)
	h.handle("PUT /v1/jobs/parse", h.jobParse)
	h.handle("PUT /v1/allocation/{id}/stop", h.allocStop)
	h.mux.HandleFunc("PUT /v1/client/allocation/{id}/signal", h.onAllocNode(h.allocSignal))
	h.mux.HandleFunc("PUT /v1/client/allocation/{id}/restart", h.onAllocNode(h.allocRestart))
	h.mux.HandleFunc("GET /v1/client/allocation/{id}/exec", h.onAllocNode(h.allocExecWS))
}

// evalList handles GET /v1/evaluations (?prefix, blocking): the
// evaluations the caller may read, in ID order.
func (h *handler) evalList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	el, ok := h.srv.(EvalLister)
	if !ok {
		return nil, &codedError{code: http.StatusNotImplemented, msg: "this server does not list evaluations"}
	}
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	evals, meta, err := el.EvalList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	evals = visible(r, evals, structs.NamespaceCapabilityReadJob, func(e *structs.Evaluation) string { return e.Namespace })
	return evalsRead(evals), nil
}

// searchRequest is the body of PUT /v1/search: Nomad's SearchRequest.
// Its other fields (the client's query options) are ignored.
type searchRequest struct {
	Prefix  string
	Context string
}

// searchResponse is Nomad's SearchResponse: per context, the matching
// IDs and whether there were more than searchLimit.
type searchResponse struct {
	Matches     map[string][]string
	Truncations map[string]bool
}

// Search contexts GPUlayer answers; Nomad's others (deployment, plugins,
// volumes, quotas...) are answered empty.
var searchContexts = []string{"jobs", "evals", "allocs", "nodes", "namespaces"}

// search handles PUT|POST /v1/search: a prefix search over job IDs,
// evaluation, allocation and node IDs and namespace names, each limited
// to what the caller may read. Context "all" (or empty) searches every
// one; an unknown context is 400.
func (h *handler) search(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	var req searchRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if len(req.Prefix) > 256 {
		return nil, badRequest("Prefix longer than 256 characters")
	}
	ctxs := searchContexts
	switch c := strings.ToLower(req.Context); {
	case c == "" || c == "all":
	case slices.Contains(searchContexts, c):
		ctxs = []string{c}
	case slices.Contains([]string{"deployment", "plugins", "volumes", "host_volumes", "quotas", "recommendations", "scaling_policy", "variables", "node_pools"}, c):
		ctxs = []string{c}
	default:
		return nil, badRequest("invalid search context %q: want one of all, %s", req.Context, strings.Join(searchContexts, ", "))
	}
	acl, _ := aclFrom(r)
	q := &structs.QueryOptions{Prefix: req.Prefix, AllowStale: true}
	out := &searchResponse{Matches: map[string][]string{}, Truncations: map[string]bool{}}
	var index uint64
	add := func(ctx string, ids []string) {
		slices.Sort(ids)
		ids = slices.Compact(ids)
		if len(ids) > searchLimit {
			ids = ids[:searchLimit]
			out.Truncations[ctx] = true
		} else {
			out.Truncations[ctx] = false
		}
		out.Matches[ctx] = ids
	}
	for _, c := range ctxs {
		ids := []string{}
		switch c {
		case "jobs":
			jobs, meta, err := h.srv.JobList(r.Context(), q)
			if err != nil {
				return nil, err
			}
			index = max(index, meta.Index)
			for _, j := range visible(r, jobs, structs.NamespaceCapabilityListJobs, func(j *structs.Job) string { return j.Namespace }) {
				ids = append(ids, j.ID)
			}
		case "allocs":
			allocs, meta, err := h.srv.AllocList(r.Context(), q)
			if err != nil {
				return nil, err
			}
			index = max(index, meta.Index)
			for _, a := range visible(r, allocs, structs.NamespaceCapabilityReadJob, allocNamespace) {
				ids = append(ids, a.ID)
			}
		case "evals":
			if el, ok := h.srv.(EvalLister); ok {
				evals, meta, err := el.EvalList(r.Context(), q)
				if err != nil {
					return nil, err
				}
				index = max(index, meta.Index)
				for _, e := range visible(r, evals, structs.NamespaceCapabilityReadJob, func(e *structs.Evaluation) string { return e.Namespace }) {
					ids = append(ids, e.ID)
				}
			}
		case "nodes":
			if acl.IsManagement() || acl.AllowNodeRead() {
				nodes, meta, err := h.srv.NodeList(r.Context(), q)
				if err != nil {
					return nil, err
				}
				index = max(index, meta.Index)
				for _, n := range nodes {
					ids = append(ids, n.ID)
				}
			}
		case "namespaces":
			nss, _, err := h.namespaceNames(r, &structs.QueryOptions{AllowStale: true})
			if err != nil {
				return nil, err
			}
			for _, ns := range nss {
				if strings.HasPrefix(ns, req.Prefix) {
					ids = append(ids, ns)
				}
			}
		}
		add(c, ids)
	}
	setMeta(w, structs.QueryMeta{Index: index, KnownLeader: h.knownLeader()})
	return out, nil
}

// knownLeader reports whether the server knows a leader.
func (h *handler) knownLeader() bool { return h.srv.Leader() != "" }

// regions handles GET /v1/regions: GPUlayer has one region, the agent's.
func (h *handler) regions(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	return []string{h.region}, nil
}

// namespaceNames returns "default" and every namespace a job lives in
// that the caller may see, sorted, read as q's (blocking) query on the
// jobs: namespaces change only with them.
func (h *handler) namespaceNames(r *http.Request, q *structs.QueryOptions) ([]string, structs.QueryMeta, error) {
	q.Prefix = ""
	jobs, meta, err := h.srv.JobList(r.Context(), q)
	if err != nil {
		return nil, meta, err
	}
	names := []string{convert.DefaultNamespace}
	for _, j := range jobs {
		names = append(names, nsOrDefault(j.Namespace))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	acl, _ := aclFrom(r)
	out := names[:0]
	for _, n := range names {
		if acl.IsManagement() || acl.AllowNamespace(n) {
			out = append(out, n)
		}
	}
	return out, meta, nil
}

// namespaces handles GET /v1/namespaces: GPUlayer has no namespace
// objects; it answers "default" and the namespaces its jobs name, as far
// as the caller may see them, in Nomad's Namespace shape.
func (h *handler) namespaces(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	names, meta, err := h.namespaceNames(r, q)
	if err != nil {
		return nil, err
	}
	out := make([]*api.Namespace, 0, len(names))
	for _, n := range names {
		out = append(out, namespaceOf(n))
	}
	setMeta(w, meta)
	return out, nil
}

// namespaceGet handles GET /v1/namespace/{name}; a namespace no job
// names (other than "default") is 404.
func (h *handler) namespaceGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	names, meta, err := h.namespaceNames(r, q)
	if err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if !slices.Contains(names, name) {
		return nil, &codedError{code: http.StatusNotFound, msg: "namespace not found"}
	}
	setMeta(w, meta)
	return namespaceOf(name), nil
}

func namespaceOf(name string) *api.Namespace {
	n := &api.Namespace{Name: name, CreateIndex: 1, ModifyIndex: 1}
	if name == convert.DefaultNamespace {
		n.Description = "Default shared namespace"
	}
	return n
}
