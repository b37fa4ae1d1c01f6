package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// EndpointServer is what the endpoint fleet routes need from a server
// (*server.Server implements it):
//
//	GET    /v1/endpoints             every endpoint (?namespace=, "*" all; ?prefix=)
//	GET    /v1/endpoint/{name}       one endpoint; name may be an alias
//	GET    /v1/endpoint/aliases      the promoted aliases
//	PUT    /v1/endpoint/alias/{alias} promote: {"Endpoint": "llm-70b"}
//	DELETE /v1/endpoint/alias/{alias} demote
type EndpointServer interface {
	EndpointList(ctx context.Context, ns string, q *structs.QueryOptions) ([]*structs.EndpointView, structs.QueryMeta, error)
	EndpointGet(ctx context.Context, ns, name string, q *structs.QueryOptions) (*structs.EndpointView, structs.QueryMeta, error)
	EndpointAliasList(ctx context.Context, ns string, q *structs.QueryOptions) ([]*structs.EndpointAlias, structs.QueryMeta, error)
	EndpointAliasPromote(ctx context.Context, args *structs.EndpointAliasPromoteArgs) (*structs.EndpointAlias, uint64, error)
	EndpointAliasDemote(ctx context.Context, ns, alias string) (uint64, error)
}

// maxAliasPromoteBody bounds the promotion body, in bytes: one endpoint
// name fits many times over.
const maxAliasPromoteBody = 4 << 10

// endpointRoutes registers the endpoint fleet routes when the server
// implements EndpointServer.
func (h *handler) endpointRoutes() {
	es, ok := h.srv.(EndpointServer)
	if !ok {
		return
	}
	h.handle("GET /v1/endpoints", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		list, meta, err := es.EndpointList(r.Context(), nsOrDefault(r.URL.Query().Get("namespace")), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		list = visible(r, list, structs.NamespaceCapabilityReadJob, func(v *structs.EndpointView) string { return v.Namespace })
		return convert.EndpointViewsFromStructs(list), nil
	})
	h.handle("GET /v1/endpoint/aliases", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		list, meta, err := es.EndpointAliasList(r.Context(), nsOrDefault(r.URL.Query().Get("namespace")), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		list = visible(r, list, structs.NamespaceCapabilityReadJob, func(a *structs.EndpointAlias) string { return a.Namespace })
		return convert.EndpointAliasesFromStructs(list), nil
	})
	h.handle("GET /v1/endpoint/{name}", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		name := r.PathValue("name")
		if err := structs.ValidateEndpointAliasName("name", name); err != nil {
			return nil, err
		}
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		v, meta, err := es.EndpointGet(r.Context(), nsOrDefault(r.URL.Query().Get("namespace")), name, q)
		if err != nil {
			setMetaOnError(w, meta)
			return nil, err
		}
		setMeta(w, meta)
		return convert.EndpointViewFromStructs(v), nil
	})
	promote := func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		alias := r.PathValue("alias")
		if err := structs.ValidateEndpointAliasName("alias", alias); err != nil {
			return nil, err
		}
		req, err := decodeAliasPromote(http.MaxBytesReader(w, r.Body, maxAliasPromoteBody))
		if err != nil {
			return nil, err
		}
		a, index, err := es.EndpointAliasPromote(r.Context(), &structs.EndpointAliasPromoteArgs{
			Namespace: nsOrDefault(r.URL.Query().Get("namespace")), Alias: alias, Endpoint: req.Endpoint, PromotedBy: promotedBy(r)})
		if err != nil {
			return nil, err
		}
		setIndex(w, index)
		return &api.EndpointAliasPromoteResponse{Alias: convert.EndpointAliasFromStructs(a), Index: index}, nil
	}
	h.handle("PUT /v1/endpoint/alias/{alias}", promote)
	h.handle("POST /v1/endpoint/alias/{alias}", promote)
	h.handle("DELETE /v1/endpoint/alias/{alias}", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		alias := r.PathValue("alias")
		if err := structs.ValidateEndpointAliasName("alias", alias); err != nil {
			return nil, err
		}
		index, err := es.EndpointAliasDemote(r.Context(), nsOrDefault(r.URL.Query().Get("namespace")), alias)
		if err != nil {
			return nil, err
		}
		setIndex(w, index)
		return struct{}{}, nil
	})
}

// decodeAliasPromote reads a promotion body strictly: one JSON object
// with only "Endpoint", a valid endpoint name, and nothing after it.
// Errors are 400s naming what is wrong (a body over its bound is 413).
func decodeAliasPromote(body io.Reader) (*api.EndpointAliasPromoteRequest, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &codedError{code: http.StatusRequestEntityTooLarge, msg: "request body larger than 4096 bytes"}
		}
		return nil, badRequest("reading request body: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, badRequest(`request body is empty; want {"Endpoint": "<endpoint name>"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var req api.EndpointAliasPromoteRequest
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("malformed promotion body: %v", err)
	}
	if dec.More() {
		return nil, badRequest("malformed promotion body: data after the JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("malformed promotion body: data after the JSON object")
	}
	if err := structs.ValidateEndpointAliasName("Endpoint", req.Endpoint); err != nil {
		return nil, err
	}
	return &req, nil
}

// promotedBy names the caller for the alias record: the ACL token's
// accessor ID and name, or "anonymous" (ACLs off, or the anonymous
// token).
func promotedBy(r *http.Request) string {
	_, tok := aclFrom(r)
	if tok == nil || tok.AccessorID == "" || tok.AccessorID == "anonymous" {
		return "anonymous"
	}
	if tok.Name == "" {
		return tok.AccessorID
	}
	return tok.AccessorID + " (" + tok.Name + ")"
}
