package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ACLPolicy is a named set of HCL rules (Nomad's api.ACLPolicy).
type ACLPolicy struct {
	Name        string
	Description string
	Rules       string
	CreateIndex uint64
	ModifyIndex uint64
}

// ACLPolicyListStub is a policy in a list.
type ACLPolicyListStub struct {
	Name        string
	Description string
	CreateIndex uint64
	ModifyIndex uint64
}

// ACLToken is a token (Nomad's api.ACLToken). SecretID is shown only to
// management tokens, to the token itself and at creation. Type is
// "client" or "management"; ExpirationTTL (nanoseconds in JSON) asks for
// an expiry at creation.
type ACLToken struct {
	AccessorID     string
	SecretID       string
	Name           string
	Type           string
	Policies       []string
	Global         bool
	CreateTime     time.Time
	ExpirationTime *time.Time    `json:",omitempty"`
	ExpirationTTL  time.Duration `json:",omitempty"`
	CreateIndex    uint64
	ModifyIndex    uint64
}

// ACLTokenListStub is a token in a list: no secret.
type ACLTokenListStub struct {
	AccessorID     string
	Name           string
	Type           string
	Policies       []string
	Global         bool
	CreateTime     time.Time
	ExpirationTime *time.Time `json:",omitempty"`
	CreateIndex    uint64
	ModifyIndex    uint64
}

// ACLPolicies is the client for /v1/acl/policies and /v1/acl/policy.
type ACLPolicies struct{ c *Client }

// ACLPolicies returns the ACL policy endpoints.
func (c *Client) ACLPolicies() *ACLPolicies { return &ACLPolicies{c: c} }

// List returns the policies the token may see (all for management).
func (p *ACLPolicies) List(q *QueryOptions) ([]*ACLPolicyListStub, *QueryMeta, error) {
	var out []*ACLPolicyListStub
	qm, err := p.c.query("/v1/acl/policies", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Info returns one policy.
func (p *ACLPolicies) Info(name string, q *QueryOptions) (*ACLPolicy, *QueryMeta, error) {
	var out ACLPolicy
	qm, err := p.c.query("/v1/acl/policy/"+url.PathEscape(name), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Upsert creates or replaces a policy (management only).
func (p *ACLPolicies) Upsert(policy *ACLPolicy, w *WriteOptions) (*WriteMeta, error) {
	return p.c.write(http.MethodPut, "/v1/acl/policy/"+url.PathEscape(policy.Name), nil, policy, nil, w)
}

// Delete removes a policy (management only).
func (p *ACLPolicies) Delete(name string, w *WriteOptions) (*WriteMeta, error) {
	return p.c.write(http.MethodDelete, "/v1/acl/policy/"+url.PathEscape(name), nil, nil, nil, w)
}

// ACLTokens is the client for /v1/acl/bootstrap, /v1/acl/tokens and
// /v1/acl/token.
type ACLTokens struct{ c *Client }

// ACLTokens returns the ACL token endpoints.
func (c *Client) ACLTokens() *ACLTokens { return &ACLTokens{c: c} }

// Bootstrap creates the first management token; a second call fails.
func (t *ACLTokens) Bootstrap(w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	var out ACLToken
	wm, err := t.c.write(http.MethodPut, "/v1/acl/bootstrap", nil, nil, &out, w)
	if err != nil {
		return nil, nil, err
	}
	return &out, wm, nil
}

// List returns every token without secrets (management only).
func (t *ACLTokens) List(q *QueryOptions) ([]*ACLTokenListStub, *QueryMeta, error) {
	var out []*ACLTokenListStub
	qm, err := t.c.query("/v1/acl/tokens", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Create makes a token from Name, Type, Policies and ExpirationTTL and
// returns it with its SecretID (management only).
func (t *ACLTokens) Create(token *ACLToken, w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	var out ACLToken
	wm, err := t.c.write(http.MethodPut, "/v1/acl/token", nil, token, &out, w)
	if err != nil {
		return nil, nil, err
	}
	return &out, wm, nil
}

// Update changes a token's Name, Type and Policies (management only).
func (t *ACLTokens) Update(token *ACLToken, w *WriteOptions) (*ACLToken, *WriteMeta, error) {
	var out ACLToken
	wm, err := t.c.write(http.MethodPut, "/v1/acl/token/"+url.PathEscape(token.AccessorID), nil, token, &out, w)
	if err != nil {
		return nil, nil, err
	}
	return &out, wm, nil
}

// Info returns one token by AccessorID.
func (t *ACLTokens) Info(accessor string, q *QueryOptions) (*ACLToken, *QueryMeta, error) {
	var out ACLToken
	qm, err := t.c.query("/v1/acl/token/"+url.PathEscape(accessor), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Self returns the token the client sends.
func (t *ACLTokens) Self(q *QueryOptions) (*ACLToken, *QueryMeta, error) {
	var out ACLToken
	qm, err := t.c.query("/v1/acl/token/self", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Delete removes a token by AccessorID (management only).
func (t *ACLTokens) Delete(accessor string, w *WriteOptions) (*WriteMeta, error) {
	return t.c.write(http.MethodDelete, "/v1/acl/token/"+url.PathEscape(accessor), nil, nil, nil, w)
}

// HeaderNodeSecret carries a node's secret (the agent's
// <data_dir>/client/node-secret file).
const HeaderNodeSecret = "X-Gpulayer-Node-Secret"

// RotateNodeSecret asks the client agent this Client talks to for a new
// node secret (PUT /v1/client/node/secret/rotate): the agent's client
// obtains it from its servers with its current secret and uses it from
// then on. nodeSecret is that node's current secret, which the agent
// requires (no ACL token is enough); it is sent in the
// X-Gpulayer-Node-Secret header and no ACL token is sent with it. It
// returns the node's ID; the new secret is never shown.
func (n *Nodes) RotateNodeSecret(nodeSecret string, w *WriteOptions) (string, error) {
	if strings.TrimSpace(nodeSecret) == "" {
		return "", fmt.Errorf("rotate node secret: the node's current secret is required")
	}
	var ctx context.Context
	if w != nil {
		ctx = w.Context
	}
	req, err := n.c.newRequest(ctx, http.MethodPut, "/v1/client/node/secret/rotate", nil, struct{}{})
	if err != nil {
		return "", err
	}
	req.Header.Del(HeaderNomadToken)
	req.Header.Del(HeaderToken)
	req.Header.Set(HeaderNodeSecret, strings.TrimSpace(nodeSecret))
	resp, err := n.c.do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct{ NodeID string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("decode response of PUT /v1/client/node/secret/rotate: %w", err)
	}
	return out.NodeID, nil
}
