package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// Token headers, read in this order. X-Nomad-Token and Authorization:
// Bearer are Nomad's; X-Gpulayer-Token is ours. The UI pages (GET /ui/...)
// also read the token from the uiTokenCookie cookie; API routes never do,
// so a cross-site request cannot ride on a cookie.
const (
	HeaderNomadToken    = "X-Nomad-Token"
	HeaderGpulayerToken = "X-Gpulayer-Token"
	uiTokenCookie       = "gpulayer-token"
)

// TokenResolver turns a token's secret into its compiled ACL (server.Server
// implements it from its state; NewRemoteResolver asks a server, for
// client-only agents). An empty secret is the anonymous token. Errors wrap
// structs.ErrPermissionDenied (structs.ErrACLTokenNotFound,
// structs.ErrACLTokenExpired) for a secret that may not be used.
type TokenResolver interface {
	ResolveToken(secret string) (*structs.ACL, *structs.ACLToken, error)
}

// access says who may call a route.
type access int

const (
	// accessPublic routes answer anyone: health, the UI's static files
	// and the root redirect.
	accessPublic access = iota + 1
	// accessBootstrap answers anyone; the handler refuses after the first
	// bootstrap.
	accessBootstrap
	// accessAuthenticated needs a token that resolves to an ACL that
	// allows something (the anonymous token counts when an anonymous
	// policy exists). Handlers then filter what they show.
	accessAuthenticated
	accessNamespace // rule.cap in the route's namespace (rule.ns)
	accessNodeRead
	accessNodeWrite
	accessAgentRead
	accessAgentWrite
	accessOperatorRead
	accessOperatorWrite
	accessManagement
	// accessNodeSelf needs the node secret of the node in the {id} path
	// value (header X-Gpulayer-Node-Secret, or a token header).
	accessNodeSelf
	// accessTokenRead: management, or the token named by {accessor}.
	accessTokenRead
	// accessPolicyRead: management, or a token holding policy {name}.
	accessPolicyRead
	// accessEventStream needs a token that grants something; each event
	// is then filtered by the token's rights (filterEvents).
	accessEventStream
	// accessUI needs read-job in the "default" namespace; the token may
	// come from the UI cookie.
	accessUI
	// accessLocalNodeSecret needs the current node secret of this
	// agent's own client (X-Gpulayer-Node-Secret); no token will do.
	accessLocalNodeSecret
	// accessArtifactWrite: submit-job in the upload's namespace, or a node
	// secret with ?node= (artifacts_auth.go).
	accessArtifactWrite
	// accessArtifactRead: a token that grants something, or a node secret
	// with ?node=; the handler then checks the artifact's own readers
	// (artifactReadable).
	accessArtifactRead
	// accessArtifactReplica: another server proven by its TLS certificate
	// (isServerPeer), or a management token; no user token or node secret
	// (the server-to-server push, artifactReplica).
	accessArtifactReplica
)

// nsSource says where a namespace route finds its namespace.
type nsSource int

const (
	nsQuery nsSource = iota // ?namespace=, default "default"
	nsJob                   // the job in {id} (else ?namespace=)
	nsAlloc                 // the allocation in {id} or {alloc} (else ?namespace=)
	nsEval                  // the evaluation in {id} (else ?namespace=)
	// Job versions and deployments.
	nsDeployment // the deployment in {id} (else ?namespace=)
)

// routeRule is a route's entry in routeACL.
type routeRule struct {
	access access
	cap    string // accessNamespace: the capability needed
	ns     nsSource
	// nodeProxied routes are the ones a server proxies to a node's agent
	// (node_proxy.go): that agent also accepts its own current node
	// secret on them, in place of a user token.
	nodeProxied bool
}

func nsRule(c string, src nsSource) routeRule {
	return routeRule{access: accessNamespace, cap: c, ns: src}
}

// proxiedRule marks rule as a route servers proxy to node agents.
func proxiedRule(rule routeRule) routeRule {
	rule.nodeProxied = true
	return rule
}

// routeACL is the policy of every route: mux pattern to what the caller
// needs. A route registered without an entry is refused on every request
// (fail closed), and TestRouteACLTable fails, so no route can be
// forgotten. Shapes follow Nomad's endpoint ACL checks.
var routeACL = map[string]routeRule{
	"GET /v1/status/health":  {access: accessPublic},
	"GET /{$}":               {access: accessPublic},
	"GET /ui/static/":        {access: accessPublic},
	"PUT /v1/acl/bootstrap":  {access: accessBootstrap},
	"POST /v1/acl/bootstrap": {access: accessBootstrap},

	"PUT /v1/jobs":                 nsRule(structs.NamespaceCapabilitySubmitJob, nsQuery),
	"POST /v1/jobs":                nsRule(structs.NamespaceCapabilitySubmitJob, nsQuery),
	"POST /v1/jobs/parse":          nsRule(structs.NamespaceCapabilityParseJob, nsQuery),
	"GET /v1/jobs":                 nsRule(structs.NamespaceCapabilityListJobs, nsQuery),
	"GET /v1/jobs/queue":           nsRule(structs.NamespaceCapabilityListJobs, nsQuery),
	"GET /v1/job/{id}":             nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"DELETE /v1/job/{id}":          nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"GET /v1/job/{id}/allocations": nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"GET /v1/job/{id}/evaluations": nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"PUT /v1/job/{id}/plan":        nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"POST /v1/job/{id}/plan":       nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	// Periodic and parameterized jobs (Nomad's capabilities).
	"PUT /v1/job/{id}/dispatch":        nsRule(structs.NamespaceCapabilityDispatchJob, nsJob),
	"POST /v1/job/{id}/dispatch":       nsRule(structs.NamespaceCapabilityDispatchJob, nsJob),
	"PUT /v1/job/{id}/periodic/force":  nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"POST /v1/job/{id}/periodic/force": nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),

	// Job versions and deployments (job_versions.go, deployments.go).
	"GET /v1/job/{id}/versions":                  nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"PUT /v1/job/{id}/revert":                    nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"POST /v1/job/{id}/revert":                   nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"PUT /v1/job/{id}/stable":                    nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"POST /v1/job/{id}/stable":                   nsRule(structs.NamespaceCapabilitySubmitJob, nsJob),
	"GET /v1/job/{id}/deployments":               nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"GET /v1/job/{id}/deployment":                nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"GET /v1/deployments":                        nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"GET /v1/deployment/{id}":                    nsRule(structs.NamespaceCapabilityReadJob, nsDeployment),
	"GET /v1/deployment/allocations/{id}":        nsRule(structs.NamespaceCapabilityReadJob, nsDeployment),
	"PUT /v1/deployment/promote/{id}":            nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"POST /v1/deployment/promote/{id}":           nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"PUT /v1/deployment/fail/{id}":               nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"POST /v1/deployment/fail/{id}":              nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"PUT /v1/deployment/pause/{id}":              nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"POST /v1/deployment/pause/{id}":             nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"PUT /v1/deployment/allocation-health/{id}":  nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),
	"POST /v1/deployment/allocation-health/{id}": nsRule(structs.NamespaceCapabilitySubmitJob, nsDeployment),

	// Nomad API compatibility (issue 12, wire.go).
	"GET /v1/job/{id}/summary":               nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"GET /v1/evaluations":                    nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"PUT /v1/search":                         {access: accessAuthenticated},
	"POST /v1/search":                        {access: accessAuthenticated},
	"GET /v1/regions":                        {access: accessAuthenticated},
	"GET /v1/namespaces":                     {access: accessAuthenticated},
	"GET /v1/namespace/{name}":               {access: accessAuthenticated},
	"PUT /v1/allocation/{id}/stop":           nsRule(structs.NamespaceCapabilityAllocLifecycle, nsAlloc),
	"PUT /v1/jobs/parse":                     nsRule(structs.NamespaceCapabilityParseJob, nsQuery),
	"PUT /v1/client/allocation/{id}/signal":  proxiedRule(nsRule(structs.NamespaceCapabilityAllocLifecycle, nsAlloc)),
	"GET /v1/client/allocation/{id}/exec":    proxiedRule(nsRule(structs.NamespaceCapabilityAllocExec, nsAlloc)),
	"PUT /v1/client/allocation/{id}/restart": proxiedRule(nsRule(structs.NamespaceCapabilityAllocLifecycle, nsAlloc)),

	"GET /v1/allocations":              nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"GET /v1/allocation/{id}":          nsRule(structs.NamespaceCapabilityReadJob, nsAlloc),
	"POST /v1/allocation/{id}/stop":    nsRule(structs.NamespaceCapabilityAllocLifecycle, nsAlloc),
	"POST /v1/allocation/{id}/signal":  proxiedRule(nsRule(structs.NamespaceCapabilityAllocLifecycle, nsAlloc)),
	"POST /v1/allocation/{id}/restart": proxiedRule(nsRule(structs.NamespaceCapabilityAllocLifecycle, nsAlloc)),
	"POST /v1/allocation/{id}/exec":    proxiedRule(nsRule(structs.NamespaceCapabilityAllocExec, nsAlloc)),
	"GET /v1/client/fs/logs/{alloc}":   proxiedRule(nsRule(structs.NamespaceCapabilityReadLogs, nsAlloc)),
	"GET /v1/evaluation/{id}":          nsRule(structs.NamespaceCapabilityReadJob, nsEval),

	"GET /v1/nodes":                  {access: accessNodeRead},
	"GET /v1/node/{id}":              {access: accessNodeRead},
	"POST /v1/node/{id}/drain":       {access: accessNodeWrite},
	"POST /v1/node/{id}/eligibility": {access: accessNodeWrite},
	"GET /v1/client/stats":           {access: accessNodeRead, nodeProxied: true},
	// Register needs node:write; an existing node ID also needs that
	// node's secret in the body (client_routes.go).
	"PUT /v1/node/register":           {access: accessNodeWrite},
	"PUT /v1/node/{id}/heartbeat":     {access: accessNodeSelf},
	"GET /v1/node/{id}/allocations":   {access: accessNodeSelf},
	"POST /v1/node/{id}/allocations":  {access: accessNodeSelf},
	"PUT /v1/node/{id}/secret/rotate": {access: accessNodeSelf},
	// Client-only allocation change routes (read what changed).
	"GET /v1/node/{id}/client-allocs":        {access: accessNodeSelf},
	"POST /v1/node/{id}/client-allocs/fetch": {access: accessNodeSelf},
	// A client agent rotates its node secret only for a caller that
	// holds the current one (the node's operator, from its data dir).
	"PUT /v1/client/node/secret/rotate":   {access: accessLocalNodeSecret},
	"GET /v1/status/leader":               {access: accessAuthenticated},
	"GET /v1/status/peers":                {access: accessAuthenticated},
	"GET /v1/agent/self":                  {access: accessAgentRead},
	"GET /v1/agent/members":               {access: accessAgentRead},
	"PUT /v1/agent/join":                  {access: accessAgentWrite},
	"GET /v1/metrics":                     {access: accessAgentRead},
	"GET /v1/event/stream":                {access: accessEventStream},
	"GET /v1/operator/raft/configuration": {access: accessOperatorRead},
	"DELETE /v1/operator/raft/peer":       {access: accessOperatorWrite},
	"GET /v1/operator/state-hash":         {access: accessOperatorRead},
	"GET /v1/operator/snapshot":           {access: accessManagement},
	"PUT /v1/operator/snapshot":           {access: accessManagement},
	"PUT /v1/system/gc":                   {access: accessManagement},
	"POST /v1/system/gc":                  {access: accessManagement},

	// Artifacts (artifacts.go, artifacts_auth.go).
	"POST /v1/artifacts/missing":            {access: accessArtifactWrite},
	"PUT /v1/artifact/sha256/{hex}":         {access: accessArtifactWrite},
	"PUT /v1/artifact/sha256/{hex}/replica": {access: accessArtifactReplica},
	"GET /v1/artifact/sha256/{hex}":         {access: accessArtifactRead},
	"GET /v1/artifact/sha256/{hex}/meta":    {access: accessArtifactRead},
	"GET /v1/artifacts":                     {access: accessArtifactRead},

	// Services and checks (services.go). The list spans namespaces and
	// is filtered by read-job; a client's changes need its node secret.
	"GET /v1/services":                      {access: accessAuthenticated},
	"GET /v1/service/{name}":                nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"DELETE /v1/service/{name}/{id}":        nsRule(structs.NamespaceCapabilitySubmitJob, nsQuery),
	"POST /v1/node/{id}/services":           {access: accessNodeSelf},
	"GET /v1/client/allocation/{id}/checks": proxiedRule(nsRule(structs.NamespaceCapabilityReadJob, nsAlloc)),

	"GET /v1/acl/policies":            {access: accessAuthenticated},
	"GET /v1/acl/policy/{name}":       {access: accessPolicyRead},
	"PUT /v1/acl/policy/{name}":       {access: accessManagement},
	"POST /v1/acl/policy/{name}":      {access: accessManagement},
	"DELETE /v1/acl/policy/{name}":    {access: accessManagement},
	"GET /v1/acl/tokens":              {access: accessManagement},
	"PUT /v1/acl/token":               {access: accessManagement},
	"POST /v1/acl/token":              {access: accessManagement},
	"GET /v1/acl/token/self":          {access: accessAuthenticated},
	"GET /v1/acl/token/{accessor}":    {access: accessTokenRead},
	"PUT /v1/acl/token/{accessor}":    {access: accessManagement},
	"POST /v1/acl/token/{accessor}":   {access: accessManagement},
	"DELETE /v1/acl/token/{accessor}": {access: accessManagement},

	// UI pages: the jobs pages list only the namespaces the token may
	// read (ui_pages.go filters with visible), the others need what the
	// matching API route needs.
	"GET /ui/{$}":             {access: accessUI},
	"GET /ui/":                {access: accessUI},
	"GET /ui/jobs":            {access: accessUI},
	"GET /ui/job/{id}":        nsRule(structs.NamespaceCapabilityReadJob, nsJob),
	"GET /ui/allocation/{id}": nsRule(structs.NamespaceCapabilityReadJob, nsAlloc),
	"GET /ui/nodes":           {access: accessNodeRead},
	"GET /ui/node/{id}":       {access: accessNodeRead},
	"GET /ui/servers":         {access: accessAgentRead},
	"GET /ui/run":             {access: accessUI},

	// Endpoint aliases and the fleet view (endpoints_fleet.go, issue 14):
	// reads need read-job, promotion and demotion submit-job, in
	// ?namespace= ("*" lists need read-job in "*"; lists are filtered by
	// read-job too).
	"GET /v1/endpoints":                 nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"GET /v1/endpoint/{name}":           nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"GET /v1/endpoint/aliases":          nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"PUT /v1/endpoint/alias/{alias}":    nsRule(structs.NamespaceCapabilitySubmitJob, nsQuery),
	"POST /v1/endpoint/alias/{alias}":   nsRule(structs.NamespaceCapabilitySubmitJob, nsQuery),
	"DELETE /v1/endpoint/alias/{alias}": nsRule(structs.NamespaceCapabilitySubmitJob, nsQuery),
	"GET /ui/endpoints":                 {access: accessUI},
	// Node pools (node_pools.go). Nomad's node_pool read/write map to
	// node read and operator write; the jobs list is also filtered by
	// list-jobs per namespace.
	"GET /v1/node/pools":             {access: accessNodeRead},
	"PUT /v1/node/pools":             {access: accessOperatorWrite},
	"POST /v1/node/pools":            {access: accessOperatorWrite},
	"GET /v1/node/pool/{name}":       {access: accessNodeRead},
	"DELETE /v1/node/pool/{name}":    {access: accessOperatorWrite},
	"GET /v1/node/pool/{name}/nodes": {access: accessNodeRead},
	"GET /v1/node/pool/{name}/jobs":  {access: accessNodeRead},
	// Job validation (issue 14: `gpulayer job validate`); the handler
	// checks read-job in the body job's namespace too.
	"PUT /v1/validate/job":  nsRule(structs.NamespaceCapabilityReadJob, nsQuery),
	"POST /v1/validate/job": nsRule(structs.NamespaceCapabilityReadJob, nsQuery),

	// Endpoint routers of a client (issue 14, client_endpoints.go): what
	// reading the namespace's allocations needs; proxied to the node's
	// agent with ?node_id=.
	"GET /v1/client/endpoints": proxiedRule(nsRule(structs.NamespaceCapabilityReadJob, nsQuery)),

	// Provisioning (node_pool_status.go, ui_pools.go): a pool's nodes,
	// requests, decisions and failed provider calls.
	"GET /v1/node/pool/{name}/status": {access: accessNodeRead},
	"GET /ui/pools":                   {access: accessNodeRead},
}

// errPermissionDenied is the refusal of a caller without the right: its
// text is Nomad's 403 body, "Permission denied".
var errPermissionDenied error = permissionDenied{}

type permissionDenied struct{}

func (permissionDenied) Error() string        { return "Permission denied" }
func (permissionDenied) Is(target error) bool { return target == structs.ErrPermissionDenied }

// aclCtxKey carries the caller's resolved ACL and token in the request
// context (see aclFrom).
type aclCtxKey struct{}

type aclCtx struct {
	acl   *structs.ACL
	token *structs.ACLToken
}

// aclFrom returns the caller's ACL and token as the middleware resolved
// them. With ACLs off it returns structs.ManagementACL and a nil token.
func aclFrom(r *http.Request) (*structs.ACL, *structs.ACLToken) {
	if v, ok := r.Context().Value(aclCtxKey{}).(*aclCtx); ok {
		return v.acl, v.token
	}
	return structs.ManagementACL, nil
}

// requestToken returns the token secret of r: X-Nomad-Token, then
// Authorization: Bearer, then X-Gpulayer-Token; with allowCookie, the UI
// cookie last. "" means anonymous.
func requestToken(r *http.Request, allowCookie bool) string {
	if t := strings.TrimSpace(r.Header.Get(HeaderNomadToken)); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		if t := strings.TrimSpace(a[7:]); t != "" {
			return t
		}
	}
	if t := strings.TrimSpace(r.Header.Get(HeaderGpulayerToken)); t != "" {
		return t
	}
	if allowCookie {
		if c, err := r.Cookie(uiTokenCookie); err == nil {
			if v, err := url.QueryUnescape(c.Value); err == nil {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

// authorize is the one ACL check, run by ServeHTTP for every routed
// request before forwarding or handling. It returns the request to go on
// with (carrying the caller's ACL) or an error wrapping
// structs.ErrPermissionDenied (403). A pattern without a routeACL entry is
// always refused. With ACLs off every route with an entry passes.
func (h *handler) authorize(r *http.Request, pattern string) (*http.Request, error) {
	rule, ok := routeACL[pattern]
	if !ok {
		return nil, fmt.Errorf("route %q has no ACL rule (refused): %w", pattern, structs.ErrPermissionDenied)
	}
	if !h.aclEnabled {
		return r, nil
	}
	// The mux sets path values only when it serves the request; the check
	// needs them now.
	r = withPathValues(r, pattern)
	switch rule.access {
	case accessPublic, accessBootstrap:
		return r, nil
	case accessNodeSelf:
		return r, h.authorizeNodeSelf(r)
	case accessLocalNodeSecret:
		if !h.localNodeSecretOK(r.Header.Get(structs.HeaderNodeSecret)) {
			return nil, errPermissionDenied
		}
		return r, nil
	case accessArtifactWrite, accessArtifactRead, accessArtifactReplica:
		if h.isServerPeer(r) && r.Header.Get(HeaderNomadToken) == "" && r.Header.Get(HeaderGpulayerToken) == "" && r.Header.Get("Authorization") == "" {
			return withServerPeer(r), nil
		}
		if r.Header.Get(structs.HeaderNodeSecret) != "" && rule.access != accessArtifactReplica {
			return h.authorizeArtifactNode(r)
		}
	}
	if rule.nodeProxied {
		if pr, err := h.authorizeNodeProxied(r); err != nil || pr != nil {
			return pr, err
		}
	}
	secret := requestToken(r, isUIPage(pattern))
	acl, tok, err := h.resolver.ResolveToken(secret)
	if err != nil {
		if errors.Is(err, structs.ErrPermissionDenied) {
			return nil, err
		}
		return nil, fmt.Errorf("resolve ACL token: %w", err)
	}
	if !h.allowed(r, rule, acl, tok) {
		return nil, errPermissionDenied
	}
	return r.WithContext(context.WithValue(r.Context(), aclCtxKey{}, &aclCtx{acl: acl, token: tok})), nil
}

// isUIPage reports whether pattern is a UI page, whose token may come
// from the UI cookie and whose refusal is the login page.
func isUIPage(pattern string) bool { return strings.HasPrefix(pattern, "GET /ui/") }

// allowed decides rule for a resolved caller.
func (h *handler) allowed(r *http.Request, rule routeRule, acl *structs.ACL, tok *structs.ACLToken) bool {
	switch rule.access {
	case accessAuthenticated:
		return acl.IsManagement() || acl != structs.DenyAllACL
	case accessNamespace:
		return acl.AllowNamespaceOp(h.requestNamespace(r, rule.ns), rule.cap)
	case accessNodeRead:
		return acl.AllowNodeRead()
	case accessNodeWrite:
		return acl.AllowNodeWrite()
	case accessAgentRead:
		return acl.AllowAgentRead()
	case accessAgentWrite:
		return acl.AllowAgentWrite()
	case accessOperatorRead:
		return acl.AllowOperatorRead()
	case accessOperatorWrite:
		return acl.AllowOperatorWrite()
	case accessManagement:
		return acl.IsManagement()
	case accessTokenRead:
		return acl.IsManagement() || tok != nil && tok.AccessorID != "anonymous" && tok.AccessorID == r.PathValue("accessor")
	case accessPolicyRead:
		if acl.IsManagement() {
			return true
		}
		for _, p := range tokenPolicies(tok) {
			if p == r.PathValue("name") {
				return true
			}
		}
		return false
	case accessEventStream:
		// Any token that grants something; the stream then carries only
		// the events it may read (filterEvents).
		return acl.IsManagement() || acl != structs.DenyAllACL
	case accessUI:
		return acl.AllowNamespaceOp("default", structs.NamespaceCapabilityReadJob)
	case accessArtifactWrite:
		return acl.AllowNamespaceOp(h.artifactWriteNamespace(r), structs.NamespaceCapabilitySubmitJob)
	case accessArtifactRead:
		return acl.IsManagement() || acl != structs.DenyAllACL
	case accessArtifactReplica:
		return acl.IsManagement()
	}
	return false
}

func tokenPolicies(tok *structs.ACLToken) []string {
	if tok == nil {
		return nil
	}
	return tok.Policies
}

// authorizeNodeSelf checks that the request carries the secret of the node
// in the {id} path value. Only agents with a NodeServer serve these
// routes; anywhere else they are refused.
func (h *handler) authorizeNodeSelf(r *http.Request) error {
	ns, ok := h.srv.(NodeServer)
	if !ok {
		return errPermissionDenied
	}
	secret := r.Header.Get(structs.HeaderNodeSecret)
	if secret == "" {
		secret = requestToken(r, false)
	}
	id := r.PathValue("id")
	if secret == "" || id == "" {
		return errPermissionDenied
	}
	if err := ns.AuthorizeNode(id, secret); err != nil {
		// An unknown node is refused like a wrong secret: the caller
		// must register (which needs node:write) first.
		return errPermissionDenied
	}
	return nil
}

// requestNamespace returns the namespace a route acts in: the stored
// object's when src names one and it exists, else ?namespace= (default
// "default").
func (h *handler) requestNamespace(r *http.Request, src nsSource) string {
	q := &structs.QueryOptions{AllowStale: true}
	ctx := r.Context()
	switch src {
	case nsJob:
		if h.srv != nil {
			if j, _, err := h.srv.JobGet(ctx, r.PathValue("id"), q); err == nil && j != nil {
				return nsOrDefault(j.Namespace)
			}
		}
	case nsAlloc:
		id := r.PathValue("id")
		if id == "" {
			id = r.PathValue("alloc")
		}
		if h.srv != nil {
			if a, _, err := h.srv.AllocGet(ctx, id, q); err == nil && a != nil {
				return allocNamespace(a)
			}
		} else if an, ok := h.client.(allocNamespacer); ok {
			if ns, ok := an.AllocNamespace(id); ok {
				return ns
			}
		}
	case nsEval:
		if h.srv != nil {
			if e, _, err := h.srv.EvalGet(ctx, r.PathValue("id"), q); err == nil && e != nil {
				return nsOrDefault(e.Namespace)
			}
		}
	case nsDeployment:
		if ds, ok := h.srv.(DeploymentServer); ok {
			if d, _, err := ds.DeploymentGet(ctx, r.PathValue("id"), q); err == nil && d != nil {
				return nsOrDefault(d.Namespace)
			}
		}
	}
	return nsOrDefault(r.URL.Query().Get("namespace"))
}

// allocNamespacer is implemented by clients that can name the namespace
// of an allocation they run (*client.Client).
type allocNamespacer interface {
	AllocNamespace(allocID string) (string, bool)
}

func allocNamespace(a *structs.Allocation) string {
	if a.Namespace != "" {
		return a.Namespace
	}
	if a.Job != nil {
		return nsOrDefault(a.Job.Namespace)
	}
	return "default"
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// checkJobSubmit checks, for a job register or plan body, that the caller
// may submit-job in the job's namespace and, when a job of that ID is
// stored in another namespace, in that one too (jobs are keyed by ID, so
// a write could otherwise replace another namespace's job).
func (h *handler) checkJobSubmit(r *http.Request, jobID, ns string) error {
	acl, _ := aclFrom(r)
	if acl.IsManagement() {
		return nil
	}
	if !acl.AllowNamespaceOp(nsOrDefault(ns), structs.NamespaceCapabilitySubmitJob) {
		return errPermissionDenied
	}
	if h.srv != nil && jobID != "" {
		if j, _, err := h.srv.JobGet(r.Context(), jobID, &structs.QueryOptions{AllowStale: true}); err == nil && j != nil && j.ID == jobID {
			if !acl.AllowNamespaceOp(nsOrDefault(j.Namespace), structs.NamespaceCapabilitySubmitJob) {
				return errPermissionDenied
			}
		}
	}
	return nil
}

// routeMux is the handler's ServeMux, recording every pattern registered
// so the route table test can check each against routeACL.
type routeMux struct {
	*http.ServeMux
	patterns []string
	// pools routes the paths under nodePoolSubtree (node_pools.go):
	// Nomad's "GET /v1/node/pool/{name}" overlaps "GET
	// /v1/node/{id}/allocations" without either being more specific, which
	// one ServeMux refuses to hold.
	pools *http.ServeMux
}

func newRouteMux() *routeMux {
	return &routeMux{ServeMux: http.NewServeMux(), pools: http.NewServeMux()}
}

// muxFor returns the mux that holds pattern's path.
func (m *routeMux) muxFor(pattern string) *http.ServeMux {
	_, path, _ := strings.Cut(pattern, " ")
	if strings.HasPrefix(path, nodePoolSubtree) {
		return m.pools
	}
	return m.ServeMux
}

// Handle registers handler for pattern and records the pattern.
func (m *routeMux) Handle(pattern string, handler http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.muxFor(pattern).Handle(pattern, handler)
}

// HandleFunc registers fn for pattern and records the pattern.
func (m *routeMux) HandleFunc(pattern string, fn func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.muxFor(pattern).HandleFunc(pattern, fn)
}

// Handler returns the handler and pattern of r, from the pools mux for a
// path under nodePoolSubtree.
func (m *routeMux) Handler(r *http.Request) (http.Handler, string) {
	if strings.HasPrefix(r.URL.Path, nodePoolSubtree) {
		return m.pools.Handler(r)
	}
	return m.ServeMux.Handler(r)
}

// ServeHTTP dispatches r to the mux that holds its path.
func (m *routeMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, nodePoolSubtree) {
		m.pools.ServeHTTP(w, r)
		return
	}
	m.ServeMux.ServeHTTP(w, r)
}

// withPathValues returns r with the wildcards of pattern ("GET
// /v1/job/{id}") set from r's path, as the mux will set them.
func withPathValues(r *http.Request, pattern string) *http.Request {
	_, pat, ok := strings.Cut(pattern, " ")
	if !ok || !strings.Contains(pat, "{") {
		return r
	}
	psegs := strings.Split(strings.TrimPrefix(pat, "/"), "/")
	rsegs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	r = r.Clone(r.Context())
	for i, ps := range psegs {
		if !strings.HasPrefix(ps, "{") || !strings.HasSuffix(ps, "}") || i >= len(rsegs) {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(ps, "{"), "}")
		val := rsegs[i]
		if strings.HasSuffix(name, "...") {
			name = strings.TrimSuffix(name, "...")
			val = strings.Join(rsegs[i:], "/")
		}
		if name == "$" {
			continue
		}
		if u, err := url.PathUnescape(val); err == nil {
			val = u
		}
		r.SetPathValue(name, val)
	}
	return r
}

// filterEvents returns batch without the events the caller's ACL may not
// read: job, allocation, evaluation and deployment events need read-job in the
// object's namespace, node events node read. The batch is shared by every
// subscriber, so a filtered one is a copy; nil when nothing is left.
func filterEvents(r *http.Request, batch *structs.EventBatch) *structs.EventBatch {
	acl, _ := aclFrom(r)
	if batch == nil || acl.IsManagement() {
		return batch
	}
	out := &structs.EventBatch{Index: batch.Index}
	for _, e := range batch.Events {
		if e != nil && eventAllowed(acl, e) {
			out.Events = append(out.Events, e)
		}
	}
	if len(out.Events) == 0 {
		return nil
	}
	return out
}

func eventAllowed(acl *structs.ACL, e *structs.Event) bool {
	p := e.Payload
	read := func(ns string) bool { return acl.AllowNamespaceOp(nsOrDefault(ns), structs.NamespaceCapabilityReadJob) }
	switch {
	case p.Node != nil:
		return acl.AllowNodeRead()
	case p.Job != nil:
		return read(p.Job.Namespace)
	case p.Allocation != nil:
		return read(allocNamespace(p.Allocation))
	case p.Evaluation != nil:
		return read(p.Evaluation.Namespace)
	// Service registrations.
	case p.Service != nil:
		return read(p.Service.Namespace)
	case p.Deployment != nil:
		return read(p.Deployment.Namespace)
	case p.EndpointAlias != nil:
		return read(p.EndpointAlias.Namespace)
	}
	return false
}

// visible keeps the items of a list whose namespace (ns of each) the
// caller may op in; with ACLs off or a management token it returns items
// as they are. Lists span namespaces, so the route's own check (on
// ?namespace=) is not enough.
func visible[T any](r *http.Request, items []T, op string, ns func(T) string) []T {
	acl, _ := aclFrom(r)
	if acl.IsManagement() {
		return items
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		if acl.AllowNamespaceOp(nsOrDefault(ns(it)), op) {
			out = append(out, it)
		}
	}
	return out
}
