package http

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

// aclFixture is a real single server with ACLs bootstrapped, a server
// agent's API over it and a client-only agent's API that resolves tokens
// through it.
type aclFixture struct {
	srv       *server.Server
	serverAPI *handler
	serverURL string
	clientAPI *handler
	mgmt      *structs.ACLToken
	readTok   *structs.ACLToken
	writeTok  *structs.ACLToken
	nodeA     *structs.Node // registered; its secret is nodeA.SecretID
	nodeB     *structs.Node
	// clientNode is the client-only agent's node: nodeA, with the
	// secret its client currently holds.
	clientNode *structs.Node
	jobID      string
	readPolicy string
}

const (
	readPolicyRules = `
namespace "*" { policy = "read" }
node     { policy = "read" }
agent    { policy = "read" }
operator { policy = "read" }
`
	writePolicyRules     = `namespace "default" { policy = "write" }`
	anonymousPolicyRules = `namespace "default" { policy = "read" }`
)

func newACLFixture(t testing.TB) *aclFixture {
	t.Helper()
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	srv := c.Server(0)
	ctx := context.Background()
	f := &aclFixture{srv: srv, readPolicy: "readonly", jobID: "acl-job"}
	hh, err := New(Config{Server: srv, ACLEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	f.serverAPI = hh.(*handler)
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	f.serverURL = ts.URL

	if f.mgmt, err = srv.ACLBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	for name, rules := range map[string]string{"readonly": readPolicyRules, "nswrite": writePolicyRules} {
		if _, err := srv.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: name, Rules: rules}); err != nil {
			t.Fatal(err)
		}
	}
	if f.readTok, err = srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "reader", Type: structs.ACLTokenTypeClient, Policies: []string{"readonly"}}); err != nil {
		t.Fatal(err)
	}
	if f.writeTok, err = srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "writer", Type: structs.ACLTokenTypeClient, Policies: []string{"nswrite"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []**structs.Node{&f.nodeA, &f.nodeB} {
		node := &structs.Node{ID: structs.GenerateUUID(), SecretID: structs.GenerateUUID(), Name: "n", Datacenter: "dc1", Status: structs.NodeStatusReady}
		if _, err := srv.NodeRegister(ctx, node); err != nil {
			t.Fatal(err)
		}
		*n = node
	}
	job := &structs.Job{ID: f.jobID, Name: f.jobID, Type: structs.JobTypeService, TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 0, Tasks: []*structs.Task{{Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 10, MemoryMB: 8}}}}}}
	job.Canonicalize()
	if _, err := srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}

	res, err := NewRemoteResolver(RemoteResolverConfig{Servers: []string{ts.URL}, TTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.clientNode = &structs.Node{ID: f.nodeA.ID, SecretID: f.nodeA.SecretID, Name: "n"}
	ch, err := New(Config{Client: &rotatingClient{fakeClient{node: f.clientNode, logs: map[string]string{}}}, ACLEnabled: true, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	f.clientAPI = ch.(*handler)
	return f
}

// principal is who sends a request in the table.
type principal struct {
	name string
	// token is sent in X-Nomad-Token; nodeSecret in X-Gpulayer-Node-Secret.
	token, nodeSecret string
}

// expectAllowed is the policy the table test checks routeACL's
// enforcement against, written out per access kind, principal and agent
// ("server" or "client") so the two are independent.
func expectAllowed(rule routeRule, who, agent string) bool {
	mgmt := who == "management"
	// A client agent serves the routes servers proxy to it (logs,
	// signal, restart, exec, stats) to its own node's secret, which is
	// how the servers authenticate to it (node_proxy.go).
	if agent == "client" && who == "node-self" && rule.nodeProxied {
		return true
	}
	switch rule.access {
	case accessLocalNodeSecret:
		return agent == "client" && who == "node-self"
	case accessPublic, accessBootstrap:
		return true
	case accessAuthenticated, accessEventStream:
		return who == "anonymous-policy" || who == "read" || who == "ns-write" || mgmt
	case accessNamespace:
		readCaps := map[string]bool{structs.NamespaceCapabilityListJobs: true, structs.NamespaceCapabilityParseJob: true, structs.NamespaceCapabilityReadJob: true}
		switch who {
		case "management", "ns-write":
			return true
		case "read", "anonymous-policy":
			return readCaps[rule.cap]
		}
		return false
	case accessNodeRead, accessAgentRead, accessOperatorRead, accessTokenRead, accessPolicyRead:
		return who == "read" || mgmt
	case accessNodeWrite, accessAgentWrite, accessOperatorWrite, accessManagement:
		return mgmt
	case accessNodeSelf:
		return who == "node-self"
	case accessUI:
		return who == "anonymous-policy" || who == "read" || who == "ns-write" || mgmt
	case accessArtifactWrite:
		// submit-job in "default"; a node secret needs ?node=, which the
		// table's paths lack.
		return who == "ns-write" || mgmt
	case accessArtifactReplica:
		// A server certificate (the table has none) or management.
		return mgmt
	case accessArtifactRead:
		// Any token that grants something; the handler then checks the
		// artifact's readers (TestArtifactAccess).
		return who == "anonymous-policy" || who == "read" || who == "ns-write" || mgmt
	}
	return false
}

// concrete turns a mux pattern into a method and a path.
func (f *aclFixture) concrete(pattern string) (string, string) {
	method, path, _ := strings.Cut(pattern, " ")
	path = strings.TrimSuffix(path, "{$}")
	writes := method != http.MethodGet
	repl := map[string]string{
		"{alloc}": structs.GenerateUUID(), "{name}": f.readPolicy, "{accessor}": f.readTok.AccessorID,
	}
	if writes {
		// Writes name objects that do not exist, so an allowed write
		// changes nothing the later rows need.
		repl["{name}"], repl["{accessor}"] = "no-such-policy", structs.GenerateUUID()
	}
	switch {
	case strings.HasPrefix(path, "/v1/node/"):
		repl["{id}"] = f.nodeA.ID
	case strings.HasPrefix(path, "/v1/job/"):
		repl["{id}"] = f.jobID
	default:
		repl["{id}"] = structs.GenerateUUID()
	}
	for k, v := range repl {
		path = strings.ReplaceAll(path, k, v)
	}
	if strings.HasSuffix(path, "/") && path != "/" {
		path += "x.css"
	}
	return method, path
}

// do sends one request to h and returns the status and body. Requests
// end after 300 ms, so streams (event stream, follow) return.
func do(h http.Handler, method, path string, p principal) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(method, path, nil).WithContext(ctx)
	if p.token != "" {
		req.Header.Set(HeaderNomadToken, p.token)
	}
	if p.nodeSecret != "" {
		req.Header.Set(structs.HeaderNodeSecret, p.nodeSecret)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestRouteACLTable is Must-show 1: every route registered on a server
// agent and on a client-only agent, asked by every kind of caller, gets
// the answer routeACL promises; a registered route without an entry in
// routeACL fails the test.
func TestRouteACLTable(t *testing.T) {
	f := newACLFixture(t)
	agents := []struct {
		name string
		h    *handler
	}{{"server", f.serverAPI}, {"client", f.clientAPI}}
	registered := map[string]bool{}
	for _, a := range agents {
		if len(a.h.mux.patterns) < 5 {
			t.Fatalf("%s agent: only %d routes recorded", a.name, len(a.h.mux.patterns))
		}
		for _, p := range a.h.mux.patterns {
			registered[p] = true
			if _, ok := routeACL[p]; !ok {
				t.Errorf("%s agent: route %q has no entry in routeACL (auth.go): add one", a.name, p)
			}
		}
	}
	var stale []string
	for p := range routeACL {
		if !registered[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("routeACL entries for routes no agent registers: %v", stale)
	}

	phase1 := []principal{
		{name: "no-token"},
		{name: "read", token: f.readTok.SecretID},
		{name: "ns-write", token: f.writeTok.SecretID},
		{name: "management", token: f.mgmt.SecretID},
		{name: "node-self", nodeSecret: f.nodeA.SecretID},
		{name: "node-other", nodeSecret: f.nodeB.SecretID},
	}
	run := func(ps []principal) {
		for _, a := range agents {
			patterns := append([]string(nil), a.h.mux.patterns...)
			sort.Strings(patterns)
			for _, pattern := range patterns {
				rule, ok := routeACL[pattern]
				if !ok {
					continue
				}
				method, path := f.concrete(pattern)
				for i := range ps {
					p := &ps[i]
					code, body := do(a.h, method, path, *p)
					allowed := code != http.StatusForbidden
					if want := expectAllowed(rule, p.name, a.name); allowed != want {
						t.Errorf("%s agent: %s %s as %s: status %d (%s), want allowed=%v", a.name, method, path, p.name, code, strings.TrimSpace(body), want)
					}
					if code == http.StatusOK && pattern == "PUT /v1/node/{id}/secret/rotate" && p.nodeSecret != "" {
						var out NodeSecretRotateResponse
						if err := json.Unmarshal([]byte(body), &out); err != nil || out.SecretID == "" {
							t.Fatalf("rotate answer %q: %v", body, err)
						}
						// The node's client takes the new secret, as
						// client.RotateNodeSecret does.
						p.nodeSecret, f.clientNode.SecretID = out.SecretID, out.SecretID
					}
				}
			}
		}
	}
	run(phase1)
	if _, err := f.srv.ACLPolicyUpsert(context.Background(), &structs.ACLPolicy{Name: structs.AnonymousPolicyName, Rules: anonymousPolicyRules}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the client agent's resolver cache TTL is 1 ms
	run([]principal{{name: "anonymous-policy"}})
}

// TestRouteWithoutACLRuleIsRefused checks fail-closed: a route added
// without a routeACL entry answers 403 even with a management token and
// with ACLs off.
func TestRouteWithoutACLRuleIsRefused(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		f := &fakeServer{}
		cfg := Config{Server: newFakeCluster(true), ACLEnabled: enabled}
		if enabled {
			cfg.Resolver = staticResolver{acl: structs.ManagementACL}
		}
		_ = f
		hh, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := hh.(*handler)
		h.handle("GET /v1/forgotten", func(w http.ResponseWriter, r *http.Request) (interface{}, error) { return "ran", nil })
		code, body := do(h, "GET", "/v1/forgotten", principal{token: "x"})
		if code != http.StatusForbidden || strings.Contains(body, "ran") {
			t.Fatalf("acl enabled=%v: forgotten route answered %d %s", enabled, code, body)
		}
	}
}

// staticResolver resolves every secret to one ACL.
type staticResolver struct{ acl *structs.ACL }

func (s staticResolver) ResolveToken(string) (*structs.ACL, *structs.ACLToken, error) {
	return s.acl, &structs.ACLToken{AccessorID: "static", Type: structs.ACLTokenTypeManagement}, nil
}

// rotatingClient is a fake client that can rotate its node secret.
type rotatingClient struct{ fakeClient }

func (c *rotatingClient) RotateNodeSecret(ctx context.Context) error { return nil }

// TestUIPagesTakeTheTokenCookie: a UI page without a token answers the
// login page (403, HTML); with the token in the gpulayer-token cookie it
// renders; an API route ignores the cookie (no cross-site ride).
func TestUIPagesTakeTheTokenCookie(t *testing.T) {
	f := newACLFixture(t)
	get := func(path, cookie string) (int, string) {
		req := httptest.NewRequest("GET", path, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: uiTokenCookie, Value: cookie})
		}
		rec := httptest.NewRecorder()
		f.serverAPI.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/ui/jobs", ""); code != http.StatusForbidden || !strings.Contains(body, `data-action="save-token"`) {
		t.Fatalf("UI page without a token: %d %.200s", code, body)
	}
	if code, body := get("/ui/jobs", f.readTok.SecretID); code != http.StatusOK || !strings.Contains(body, f.jobID) {
		t.Fatalf("UI page with the cookie: %d %.200s", code, body)
	}
	if code, _ := get("/v1/jobs", f.mgmt.SecretID); code != http.StatusForbidden {
		t.Fatalf("API route answered a cookie-only request: %d", code)
	}
}

// TestEventStreamFiltersByACL: a token with read-job in "default" only
// sees the events of that namespace and no node events.
func TestEventStreamFiltersByACL(t *testing.T) {
	nsJob := &structs.Job{ID: "a", Namespace: "default"}
	prodJob := &structs.Job{ID: "b", Namespace: "prod"}
	batch := &structs.EventBatch{Index: 7, Events: []*structs.Event{
		{Topic: structs.TopicJob, Key: "a", Payload: structs.EventPayload{Job: nsJob}},
		{Topic: structs.TopicJob, Key: "b", Payload: structs.EventPayload{Job: prodJob}},
		{Topic: structs.TopicNode, Key: "n", Payload: structs.EventPayload{Node: &structs.Node{ID: "n"}}},
		{Topic: structs.TopicAllocation, Key: "x", Payload: structs.EventPayload{Allocation: &structs.Allocation{ID: "x", Namespace: "prod"}}},
		{Topic: structs.TopicService, Key: "s", Payload: structs.EventPayload{Service: &structs.ServiceRegistration{ID: "s", Namespace: "prod"}}},
		{Topic: structs.TopicEndpointAlias, Key: "llm.primary", Payload: structs.EventPayload{EndpointAlias: &structs.EndpointAlias{Name: "llm.primary", Namespace: "prod"}}},
	}}
	acl := structs.NewACL([]*structs.ACLPolicyRules{{Namespaces: []*structs.ACLNamespaceRule{{Name: "default", Policy: structs.PolicyRead}}}})
	r := httptest.NewRequest("GET", "/v1/event/stream", nil)
	r = r.WithContext(context.WithValue(r.Context(), aclCtxKey{}, &aclCtx{acl: acl}))
	out := filterEvents(r, batch)
	if out == nil || len(out.Events) != 1 || out.Events[0].Key != "a" || len(batch.Events) != 6 {
		t.Fatalf("filtered batch %+v (shared batch now %d events)", out, len(batch.Events))
	}
	mr := httptest.NewRequest("GET", "/v1/event/stream", nil)
	if got := filterEvents(mr, batch); got != batch {
		t.Fatal("ACLs off (management): the batch was filtered")
	}
}

// TestListsShowOnlyVisibleNamespaces: a token that may read namespace
// "default" only does not see another namespace's jobs in GET /v1/jobs.
func TestListsShowOnlyVisibleNamespaces(t *testing.T) {
	f := newACLFixture(t)
	prod := &structs.Job{ID: "prod-job", Name: "prod-job", Namespace: "prod", Type: structs.JobTypeService, TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 0, Tasks: []*structs.Task{{Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 10, MemoryMB: 8}}}}}}
	prod.Canonicalize()
	if _, err := f.srv.JobRegister(context.Background(), prod); err != nil {
		t.Fatal(err)
	}
	code, body := do(f.serverAPI, "GET", "/v1/jobs", principal{token: f.writeTok.SecretID})
	if code != http.StatusOK || !strings.Contains(body, f.jobID) || strings.Contains(body, "prod-job") {
		t.Fatalf("GET /v1/jobs as the default-namespace writer: %d %s", code, body)
	}
	if code, body := do(f.serverAPI, "GET", "/v1/jobs", principal{token: f.mgmt.SecretID}); code != http.StatusOK || !strings.Contains(body, "prod-job") {
		t.Fatalf("GET /v1/jobs as management: %d %s", code, body)
	}
	if code, _ := do(f.serverAPI, "GET", "/v1/job/prod-job", principal{token: f.writeTok.SecretID}); code != http.StatusForbidden {
		t.Fatalf("GET /v1/job/prod-job as the default-namespace writer: %d", code)
	}
}
