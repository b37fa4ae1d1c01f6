package http

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Proxying to a node's agent (logs, exec, signal, restart, telemetry).
//
// The agent that receives a user's request checks the user's ACL
// (authorize), then reaches the agent of the allocation's node at the
// HTTPAddr registered under that node's identity. It never sends the
// user's credentials there: none of the token headers, no Authorization,
// no Cookie, no header it does not know (proxyHeaders is an allow list).
// It authenticates as the cluster instead, with the secret its state holds
// for exactly that node ID (X-Gpulayer-Node-Secret) and, with tls.http on,
// its server certificate. A node registered by a node-write holder at an
// address of their choosing so only ever receives the secret it chose
// itself. The node's agent accepts its own current secret on the proxied
// routes only (routeRule.nodeProxied), and never proxies such a request
// further.

// nodeSecreter is implemented by servers that can name a node's secret
// (*server.Server).
type nodeSecreter interface {
	// NodeSecret returns the SecretID stored for nodeID; errors wrap
	// structs.ErrNotFound for an unknown node.
	NodeSecret(nodeID string) (string, error)
}

// proxyHeaders are the only request headers copied to a node's agent: what
// the proxied routes read of a request, and nothing that authenticates.
var proxyHeaders = []string{"Accept", "Content-Type", "User-Agent"}

// nodeProxyHeader returns the headers of a request this agent sends to the
// agent of node nodeID on behalf of r: the allow-listed headers of r, the
// forwarded mark and the node's secret. It fails when this agent's server
// cannot name the node's secret (the request is then not sent at all).
func (h *handler) nodeProxyHeader(r *http.Request, nodeID string) (http.Header, error) {
	out := http.Header{}
	for _, k := range proxyHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			out[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	out.Set(headerForwarded, "1")
	ns, ok := h.srv.(nodeSecreter)
	if !ok {
		return nil, fmt.Errorf("%w: this agent's server cannot authenticate to node agents", structs.ErrInvalid)
	}
	secret, err := ns.NodeSecret(nodeID)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", nodeID, err)
	}
	if secret != "" {
		out.Set(structs.HeaderNodeSecret, secret)
	}
	return out, nil
}

// nodeProxiedCtxKey marks, in a request's context, a request the
// middleware accepted on this agent's own node secret.
type nodeProxiedCtxKey struct{}

// proxied reports whether r came from another agent proxying it here
// (the forwarded mark, or this node's secret): such a request is served
// from this agent's own client or refused, never proxied again.
func proxied(r *http.Request) bool {
	if r.Header.Get(headerForwarded) != "" {
		return true
	}
	v, _ := r.Context().Value(nodeProxiedCtxKey{}).(bool)
	return v
}

// localNodeSecretOK reports whether secret is the current node secret of
// this agent's client (constant-time; a rotated secret is refused from
// the rotation on). No client, or an empty secret on either side, is
// false.
func (h *handler) localNodeSecretOK(secret string) bool {
	if h.client == nil || secret == "" {
		return false
	}
	n := h.client.Node()
	if n == nil || n.SecretID == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(n.SecretID), []byte(secret)) == 1
}

// authorizeNodeProxied accepts a request to a proxied route that carries
// this agent's own node secret. It returns (nil, nil) when r carries no
// node secret (the caller's token decides), the request marked as proxied
// when the secret is this node's, and a refusal for any other secret.
func (h *handler) authorizeNodeProxied(r *http.Request) (*http.Request, error) {
	secret := r.Header.Get(structs.HeaderNodeSecret)
	if secret == "" {
		return nil, nil
	}
	if !h.localNodeSecretOK(secret) {
		return nil, errPermissionDenied
	}
	ctx := context.WithValue(r.Context(), nodeProxiedCtxKey{}, true)
	// The cluster, not a user: the handlers of these routes act only on
	// this node's own allocations and read no ACL.
	ctx = context.WithValue(ctx, aclCtxKey{}, &aclCtx{acl: structs.DenyAllACL})
	return r.WithContext(ctx), nil
}

// nodeProxyTimeout bounds a read proxied to another node's agent
// (telemetry, endpoint routers, checks): these are status reads, a slow
// node must not hold a page.
const nodeProxyTimeout = 3 * time.Second

// nodeGetJSON reads pathQuery (a path with its query, escaped by the
// caller) from the agent of node on behalf of r, authenticated as the
// cluster (nodeProxyHeader), within nodeProxyTimeout, and decodes the JSON
// answer of at most limit bytes into out. what names the read in errors
// ("telemetry", "endpoints", "checks").
//
// Errors: ErrNotFound when the node registered no HTTP address;
// ErrInvalid when that address does not parse; the nodeProxyHeader error
// when the node's secret is unknown (nothing is sent); a 502 codedError
// when the node's agent cannot be reached, its body cannot be read or is
// not JSON; and for an answer other than 200 a codedError with the node's
// own status when passStatus is set (its 404 for an allocation it no
// longer runs is the caller's 404), else 502.
func (h *handler) nodeGetJSON(r *http.Request, node *structs.Node, pathQuery, what string, limit int64, passStatus bool, out any) error {
	if node.HTTPAddr == "" {
		return fmt.Errorf("node %q has no HTTP address to read %s from: %w", node.ID, what, structs.ErrNotFound)
	}
	base, err := h.peers.nodeURL(node.HTTPAddr)
	if err != nil {
		return fmt.Errorf("node %q HTTP address %q: %w: %v", node.ID, node.HTTPAddr, structs.ErrInvalid, err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), nodeProxyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base.String(), "/")+pathQuery, nil)
	if err != nil {
		return fmt.Errorf("proxy %s to node %q: %w", what, node.ID, err)
	}
	// The node's agent gets the node's secret, never the caller's token:
	// the caller's right was checked here (routeACL).
	if req.Header, err = h.nodeProxyHeader(r, node.ID); err != nil {
		return err
	}
	resp, err := h.peers.node.Do(req)
	if err != nil {
		return &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("read %s of node %q at %s: %v", what, node.ID, node.HTTPAddr, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("read %s of node %q: %v", what, node.ID, err)}
	}
	if resp.StatusCode != http.StatusOK {
		code := http.StatusBadGateway
		if passStatus {
			code = resp.StatusCode
		}
		return &codedError{code: code, msg: fmt.Sprintf("node %q answered %s: %.200s", node.ID, resp.Status, body)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &codedError{code: http.StatusBadGateway, msg: fmt.Sprintf("node %q sent bad %s: %v", node.ID, what, err)}
	}
	return nil
}
