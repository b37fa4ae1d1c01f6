package http

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// ServiceServer is what the service routes need from a server
// (*server.Server implements it):
//
//	GET    /v1/services                 services by namespace (?namespace=, "*" all)
//	GET    /v1/service/{name}           every healthy instance of a service
//	DELETE /v1/service/{name}/{id}      remove one registration
//	POST   /v1/node/{id}/services       a client's instance changes (node secret)
type ServiceServer interface {
	ServiceRegistrations(ctx context.Context, q *structs.QueryOptions) ([]*structs.ServiceRegistration, structs.QueryMeta, error)
	ServiceRegistrationsByName(ctx context.Context, ns, name string, q *structs.QueryOptions) ([]*structs.ServiceRegistration, structs.QueryMeta, error)
	DeleteServiceRegistration(ctx context.Context, ns, name, id string) error
	NodeServices(ctx context.Context, nodeID string, req *structs.NodeServicesRequest) error
}

// checkStatuser is implemented by clients that run service checks
// (*client.Client): the latest result of each check of an allocation they
// run, by check ID, and false for an allocation they do not run.
type checkStatuser interface {
	AllocCheckStatuses(allocID string) (map[string]*structs.CheckStatus, bool)
}

// serviceRoutes registers the service routes when the server implements
// ServiceServer.
func (h *handler) serviceRoutes() {
	ss, ok := h.srv.(ServiceServer)
	if !ok {
		return
	}
	h.handle("GET /v1/services", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		regs, meta, err := ss.ServiceRegistrations(r.Context(), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		ns := nsOrDefault(r.URL.Query().Get("namespace"))
		var keep []*structs.ServiceRegistration
		for _, reg := range regs {
			if ns == "*" || reg.Namespace == ns {
				keep = append(keep, reg)
			}
		}
		keep = visible(r, keep, structs.NamespaceCapabilityReadJob, func(reg *structs.ServiceRegistration) string { return reg.Namespace })
		return convert.ServiceStubsFromStructs(keep), nil
	})
	h.handle("GET /v1/service/{name}", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		q, err := parseQueryOptions(r)
		if err != nil {
			return nil, err
		}
		regs, meta, err := ss.ServiceRegistrationsByName(r.Context(), nsOrDefault(r.URL.Query().Get("namespace")), r.PathValue("name"), q)
		if err != nil {
			return nil, err
		}
		setMeta(w, meta)
		return convert.ServiceRegistrationsFromStructs(regs), nil
	})
	h.handle("DELETE /v1/service/{name}/{id}", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		if err := ss.DeleteServiceRegistration(r.Context(), nsOrDefault(r.URL.Query().Get("namespace")), r.PathValue("name"), r.PathValue("id")); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	})
	if ns, ok := h.srv.(NodeServer); ok {
		n := &nodeRoutes{h: h, ns: ns}
		h.handle("POST /v1/node/{id}/services", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
			id := r.PathValue("id")
			var req structs.NodeServicesRequest
			if err := h.decodeBody(w, r, &req); err != nil {
				return nil, err
			}
			if err := n.authorize(r, id); err != nil {
				return nil, err
			}
			if err := ss.NodeServices(r.Context(), id, &req); err != nil {
				return nil, err
			}
			return struct{}{}, nil
		})
	}
}

// checkRoutes registers GET /v1/client/allocation/{id}/checks: served by
// this agent's client when it runs the allocation, else proxied to the
// agent of the allocation's node (like logs).
func (h *handler) checkRoutes() {
	h.handle("GET /v1/client/allocation/{id}/checks", h.allocChecks)
}

// checksProxyLimit bounds a proxied checks answer.
const checksProxyLimit = 4 << 20

func (h *handler) allocChecks(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	if cs, ok := h.client.(checkStatuser); ok && h.client != nil {
		if st, ok := cs.AllocCheckStatuses(id); ok {
			return convert.CheckStatusesFromStructs(st), nil
		}
	}
	if proxied(r) || h.srv == nil {
		return nil, fmt.Errorf("allocation %q does not run on this agent's node: %w", id, structs.ErrNotFound)
	}
	a, _, err := h.srv.AllocGet(r.Context(), id, &structs.QueryOptions{AllowStale: true})
	if err != nil {
		return nil, err
	}
	node, _, err := h.srv.NodeGet(r.Context(), a.NodeID, &structs.QueryOptions{AllowStale: true})
	if err != nil {
		return nil, err
	}
	// The node's own status passes through: its 404 for an allocation
	// it no longer runs is this route's 404.
	out := map[string]json.RawMessage{}
	if err := h.nodeGetJSON(r, node, "/v1/client/allocation/"+url.PathEscape(a.ID)+"/checks", "checks", checksProxyLimit, true, &out); err != nil {
		return nil, err
	}
	return out, nil
}
