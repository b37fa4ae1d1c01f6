package http

import (
	"net/http"

	"github.com/gpulayer/gpulayer/structs"
)

// The endpoints page (/ui/endpoints, issue 14): every model-serving
// endpoint the token may read, with its status, members admitted of
// total, node, job version and aliases, and the promoted aliases with who
// promoted them and when. Aliases raise no events, so the page also
// polls.

type endpointsView struct {
	pageBase
	Endpoints []*structs.EndpointView
	Aliases   []*structs.EndpointAlias
}

func (u *ui) endpointsPage(r *http.Request) (string, pageData, error) {
	// Members' admission travels with their allocations; alias moves
	// raise EndpointAlias events.
	v := &endpointsView{pageBase: pageBase{Nav: "endpoints", StreamTopics: []string{structs.TopicJob, structs.TopicAllocation, structs.TopicNode,
		structs.TopicEndpointAlias}}}
	es, ok := u.h.srv.(EndpointServer)
	if !ok {
		return "endpoints", v, nil
	}
	q := &structs.QueryOptions{AllowStale: true}
	list, _, err := es.EndpointList(r.Context(), "*", q)
	if err != nil {
		return "", nil, err
	}
	aliases, _, err := es.EndpointAliasList(r.Context(), "*", q)
	if err != nil {
		return "", nil, err
	}
	v.Endpoints = visible(r, list, structs.NamespaceCapabilityReadJob, func(e *structs.EndpointView) string { return e.Namespace })
	v.Aliases = visible(r, aliases, structs.NamespaceCapabilityReadJob, func(a *structs.EndpointAlias) string { return a.Namespace })
	return "endpoints", v, nil
}
