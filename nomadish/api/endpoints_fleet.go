package api

import (
	"net/http"
	"net/url"
	"time"
)

// This file holds the fleet view of model-serving endpoints (issue 14):
// GET /v1/endpoints, GET /v1/endpoint/:name (a name or an alias), the
// aliases, and their promotion and demotion.

// Endpoint statuses (EndpointView.Status).
const (
	EndpointStatusServing  = "serving"  // at least one member admitted
	EndpointStatusDegraded = "degraded" // members run, none admitted
	EndpointStatusDown     = "down"     // no member runs
	EndpointStatusStopped  = "stopped"  // the job is stopped
)

// EndpointView is one endpoint as the fleet sees it: the job declaring
// it, the node its members run on, how many members the node's router
// admits, and the aliases resolving to it.
type EndpointView struct {
	Namespace        string
	Name             string
	JobID            string
	JobVersion       uint64
	TaskGroup        string
	Model            string
	Revision         string `json:",omitempty"`
	Port             int
	Count            int
	NodeID           string
	NodeName         string
	NodeAvailability string
	// Address is the router's "host:port" ("" until placed).
	Address string `json:",omitempty"`
	// Members counts the live allocations; Admitted those the router
	// admits.
	Members    int
	Admitted   int
	MemberList []*EndpointMemberView
	Aliases    []string
	Status     string
}

// EndpointMemberView is one member (allocation) of an endpoint.
type EndpointMemberView struct {
	AllocID      string
	Index        int
	NodeID       string
	ClientStatus string
	Admitted     bool
	Reason       string `json:",omitempty"`
	Identity     EndpointMemberIdentity
}

// EndpointMemberIdentity is what makes members identical: job version,
// artifact digest (docker image ID or SHA-256 of the native binary) and
// config digest.
type EndpointMemberIdentity struct {
	JobVersion     uint64
	ArtifactDigest string `json:",omitempty"`
	ConfigDigest   string `json:",omitempty"`
}

// EndpointAlias is a promoted alias: it resolves to Endpoint (declared by
// JobID); PromotedBy names the ACL token (accessor and name) or
// "anonymous".
type EndpointAlias struct {
	Namespace   string
	Name        string
	Endpoint    string
	JobID       string
	PromotedBy  string
	PromotedAt  time.Time
	CreateIndex uint64
	ModifyIndex uint64
}

// EndpointAliasPromoteRequest is the body of PUT /v1/endpoint/alias/:alias.
type EndpointAliasPromoteRequest struct {
	Endpoint string
}

// EndpointAliasPromoteResponse answers a promotion with the stored alias.
type EndpointAliasPromoteResponse struct {
	Alias *EndpointAlias
	Index uint64
}

// Endpoints is the client for /v1/endpoints and /v1/endpoint/.
type Endpoints struct{ c *Client }

// Endpoints returns the endpoints client.
func (c *Client) Endpoints() *Endpoints { return &Endpoints{c: c} }

// List returns the endpoints of the client's namespace ("*": every
// namespace the token may read), sorted by namespace and name.
func (e *Endpoints) List(q *QueryOptions) ([]*EndpointView, *QueryMeta, error) {
	var out []*EndpointView
	qm, err := e.c.query("/v1/endpoints", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Info returns one endpoint; name may be an alias.
func (e *Endpoints) Info(name string, q *QueryOptions) (*EndpointView, *QueryMeta, error) {
	var out EndpointView
	qm, err := e.c.query("/v1/endpoint/"+url.PathEscape(name), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Aliases returns the promoted aliases of the client's namespace ("*":
// every namespace the token may read).
func (e *Endpoints) Aliases(q *QueryOptions) ([]*EndpointAlias, *QueryMeta, error) {
	var out []*EndpointAlias
	qm, err := e.c.query("/v1/endpoint/aliases", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Promote points alias at endpoint in one Raft entry.
func (e *Endpoints) Promote(alias, endpoint string, w *WriteOptions) (*EndpointAlias, *WriteMeta, error) {
	var out EndpointAliasPromoteResponse
	wm, err := e.c.write(http.MethodPut, "/v1/endpoint/alias/"+url.PathEscape(alias), nil, &EndpointAliasPromoteRequest{Endpoint: endpoint}, &out, w)
	if err != nil {
		return nil, nil, err
	}
	return out.Alias, wm, nil
}

// Demote removes alias.
func (e *Endpoints) Demote(alias string, w *WriteOptions) (*WriteMeta, error) {
	return e.c.write(http.MethodDelete, "/v1/endpoint/alias/"+url.PathEscape(alias), nil, nil, nil, w)
}
