package http

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gpulayer/gpulayer/structs"
)

// ACLServer is what the ACL routes need from a server; *server.Server
// implements it. When Config.Server implements ACLServer the handler
// serves Nomad's ACL API:
//
//	PUT|POST /v1/acl/bootstrap            first management token (once)
//	GET      /v1/acl/policies             policy stubs (management: all; others: their own)
//	GET      /v1/acl/policy/{name}        one policy
//	PUT|POST /v1/acl/policy/{name}        create or replace (body ACLPolicy)
//	DELETE   /v1/acl/policy/{name}
//	GET      /v1/acl/tokens               token stubs, no secrets
//	PUT|POST /v1/acl/token                create (body ACLToken: Name, Type, Policies, ExpirationTTL)
//	GET      /v1/acl/token/self           the caller's token, with its secret
//	GET      /v1/acl/token/{accessor}     one token (secret shown to management and the token itself)
//	PUT|POST /v1/acl/token/{accessor}     update Name, Type, Policies
//	DELETE   /v1/acl/token/{accessor}
//
// and PUT /v1/node/{id}/secret/rotate for NodeSecretRotate.
type ACLServer interface {
	ACLBootstrap(ctx context.Context) (*structs.ACLToken, error)
	ACLPolicyUpsert(ctx context.Context, p *structs.ACLPolicy) (uint64, error)
	ACLPolicyDelete(ctx context.Context, name string) (uint64, error)
	ACLPolicyList(ctx context.Context, q *structs.QueryOptions) ([]*structs.ACLPolicy, structs.QueryMeta, error)
	ACLPolicyGet(ctx context.Context, name string, q *structs.QueryOptions) (*structs.ACLPolicy, structs.QueryMeta, error)
	ACLTokenUpsert(ctx context.Context, t *structs.ACLToken) (*structs.ACLToken, error)
	ACLTokenDelete(ctx context.Context, accessor string) (uint64, error)
	ACLTokenList(ctx context.Context, q *structs.QueryOptions) ([]*structs.ACLToken, structs.QueryMeta, error)
	ACLTokenGet(ctx context.Context, accessor string, q *structs.QueryOptions) (*structs.ACLToken, structs.QueryMeta, error)
	NodeSecretRotate(ctx context.Context, nodeID, secret string) (string, error)
}

// NodeSecretRotateRequest is the optional body of PUT
// /v1/node/{id}/secret/rotate: the new secret the node proposes (16 to
// 128 bytes); empty lets the server make one.
type NodeSecretRotateRequest struct {
	SecretID string
}

// NodeSecretRotateResponse is the body of PUT /v1/node/{id}/secret/rotate:
// the node's new secret. Only the node itself (by its current secret) may
// call it.
type NodeSecretRotateResponse struct {
	NodeID   string
	SecretID string
}

// aclRoutes registers the ACL routes when the server implements ACLServer.
func (h *handler) aclRoutes() {
	as, ok := h.srv.(ACLServer)
	if !ok {
		return
	}
	a := &aclRoutes{h: h, s: as}
	for _, m := range []string{"PUT", "POST"} {
		h.handle(m+" /v1/acl/bootstrap", a.bootstrap)
		h.handle(m+" /v1/acl/policy/{name}", a.policyUpsert)
		h.handle(m+" /v1/acl/token", a.tokenCreate)
		h.handle(m+" /v1/acl/token/{accessor}", a.tokenUpdate)
	}
	h.handle("GET /v1/acl/policies", a.policyList)
	h.handle("GET /v1/acl/policy/{name}", a.policyGet)
	h.handle("DELETE /v1/acl/policy/{name}", a.policyDelete)
	h.handle("GET /v1/acl/tokens", a.tokenList)
	h.handle("GET /v1/acl/token/self", a.tokenSelf)
	h.handle("GET /v1/acl/token/{accessor}", a.tokenGet)
	h.handle("DELETE /v1/acl/token/{accessor}", a.tokenDelete)
	h.handle("PUT /v1/node/{id}/secret/rotate", a.nodeSecretRotate)
}

type aclRoutes struct {
	h *handler
	s ACLServer
}

func (a *aclRoutes) enabled() error {
	if !a.h.aclEnabled {
		return structs.ErrACLDisabled
	}
	return nil
}

func (a *aclRoutes) bootstrap(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	if err := a.enabled(); err != nil {
		return nil, err
	}
	return a.s.ACLBootstrap(r.Context())
}

func (a *aclRoutes) policyUpsert(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	if err := a.enabled(); err != nil {
		return nil, err
	}
	var p structs.ACLPolicy
	if err := a.h.decodeBody(w, r, &p); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		return nil, badRequest("Name: %q in the body does not match %q in the path", p.Name, name)
	}
	index, err := a.s.ACLPolicyUpsert(r.Context(), &p)
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return struct{}{}, nil
}

func (a *aclRoutes) policyDelete(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	index, err := a.s.ACLPolicyDelete(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return struct{}{}, nil
}

// policyList answers every policy to management and the caller's own
// policies to anyone else, as Nomad does.
func (a *aclRoutes) policyList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	ps, meta, err := a.s.ACLPolicyList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	acl, tok := aclFrom(r)
	own := map[string]bool{}
	for _, p := range tokenPolicies(tok) {
		own[p] = true
	}
	out := make([]*structs.ACLPolicyListStub, 0, len(ps))
	for _, p := range ps {
		if acl.IsManagement() || own[p.Name] {
			out = append(out, p.Stub())
		}
	}
	setMeta(w, meta)
	return out, nil
}

func (a *aclRoutes) policyGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	p, meta, err := a.s.ACLPolicyGet(r.Context(), r.PathValue("name"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return p, nil
}

func (a *aclRoutes) tokenCreate(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	if err := a.enabled(); err != nil {
		return nil, err
	}
	var t structs.ACLToken
	if err := a.h.decodeBody(w, r, &t); err != nil {
		return nil, err
	}
	if t.AccessorID != "" || t.SecretID != "" {
		return nil, badRequest("AccessorID, SecretID: must be empty on create (the server makes them)")
	}
	return a.s.ACLTokenUpsert(r.Context(), &t)
}

func (a *aclRoutes) tokenUpdate(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	var t structs.ACLToken
	if err := a.h.decodeBody(w, r, &t); err != nil {
		return nil, err
	}
	id := r.PathValue("accessor")
	if t.AccessorID == "" {
		t.AccessorID = id
	}
	if t.AccessorID != id {
		return nil, badRequest("AccessorID: %q in the body does not match %q in the path", t.AccessorID, id)
	}
	if t.SecretID != "" {
		return nil, badRequest("SecretID: a token's secret cannot be changed")
	}
	return a.s.ACLTokenUpsert(r.Context(), &t)
}

func (a *aclRoutes) tokenDelete(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	index, err := a.s.ACLTokenDelete(r.Context(), r.PathValue("accessor"))
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return struct{}{}, nil
}

// tokenList answers stubs: no secrets, even to management.
func (a *aclRoutes) tokenList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	ts, meta, err := a.s.ACLTokenList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	out := make([]*structs.ACLTokenListStub, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Stub())
	}
	setMeta(w, meta)
	return out, nil
}

// tokenSelf answers the caller's own token with its secret (the caller
// sent it), or the anonymous token.
func (a *aclRoutes) tokenSelf(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	if err := a.enabled(); err != nil {
		return nil, err
	}
	_, tok := aclFrom(r)
	if tok == nil {
		return nil, structs.ErrACLTokenNotFound
	}
	return tok, nil
}

// tokenGet shows the secret to management and to the token itself.
func (a *aclRoutes) tokenGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	t, meta, err := a.s.ACLTokenGet(r.Context(), r.PathValue("accessor"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	acl, self := aclFrom(r)
	if !acl.IsManagement() && (self == nil || self.AccessorID != t.AccessorID) {
		return t.Redacted(), nil
	}
	return t, nil
}

// nodeSecretRotate handles PUT /v1/node/{id}/secret/rotate, which only
// the node's own secret may call (routeACL): the answer is the new secret
// and the old one is refused from then on.
func (a *aclRoutes) nodeSecretRotate(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	id := r.PathValue("id")
	if ns, ok := a.h.srv.(NodeServer); ok {
		// With ACLs off the middleware does not check node secrets; this
		// route always does.
		secret := r.Header.Get(structs.HeaderNodeSecret)
		if secret == "" {
			return nil, errPermissionDenied
		}
		if err := ns.AuthorizeNode(id, secret); err != nil {
			return nil, err
		}
	}
	var req NodeSecretRotateRequest
	if r.ContentLength != 0 {
		if err := a.h.decodeBody(w, r, &req); err != nil {
			return nil, err
		}
	}
	secret, err := a.s.NodeSecretRotate(r.Context(), id, req.SecretID)
	if err != nil {
		return nil, err
	}
	return NodeSecretRotateResponse{NodeID: id, SecretID: secret}, nil
}

// nodeSecretRotator is implemented by clients that can rotate their own
// node secret (*client.Client).
type nodeSecretRotator interface {
	RotateNodeSecret(ctx context.Context) error
}

// clientSecretRoutes registers PUT /v1/client/node/secret/rotate on agents
// whose client can rotate its node secret: the client asks its servers for
// a new secret with its current one and keeps working with the new one
// (`gpulayer node secret rotate` calls it). The caller must hold the
// node's current secret (X-Gpulayer-Node-Secret, read from the agent's
// data dir), with ACLs on or off: a token, even a management one, is not
// enough, so no ACL holder can take a node's identity over. The answer
// names the node, never the secret.
func (h *handler) clientSecretRoutes() {
	rot, ok := h.client.(nodeSecretRotator)
	if !ok {
		return
	}
	h.handle("PUT /v1/client/node/secret/rotate", func(w http.ResponseWriter, r *http.Request) (interface{}, error) {
		if !h.localNodeSecretOK(r.Header.Get(structs.HeaderNodeSecret)) {
			return nil, fmt.Errorf("%w: the node's current secret is required in the %s header", errPermissionDenied, structs.HeaderNodeSecret)
		}
		if err := rot.RotateNodeSecret(r.Context()); err != nil {
			return nil, err
		}
		var id string
		if n := h.client.Node(); n != nil {
			id = n.ID
		}
		return map[string]string{"NodeID": id}, nil
	})
}
