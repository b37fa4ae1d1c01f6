package http

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// fakeNodeServer adds the node calls (NodeServer) and a state hash
// (StateHasher) to fakeServer.
type fakeNodeServer struct {
	*fakeServer
	registered []*structs.Node
	heartbeats []string
	updates    []*structs.Allocation
	fetched    []string
	lastQuery  *structs.QueryOptions
}

func (f *fakeNodeServer) NodeRegister(ctx context.Context, node *structs.Node) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered = append(f.registered, node)
	f.nodes[node.ID] = node
	return 10 * time.Second, f.errs["NodeRegister"]
}

func (f *fakeNodeServer) NodeUpdateStatus(ctx context.Context, nodeID, status string) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, nodeID+"="+status)
	return 12 * time.Second, f.errs["NodeUpdateStatus"]
}

// NodeHeartbeatGPUs implements GPUHeartbeatServer: the heartbeat is
// recorded with its samples' IDs and utilisation.
func (f *fakeNodeServer) NodeHeartbeatGPUs(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hb := nodeID + "=" + status
	for _, g := range gpus {
		hb += fmt.Sprintf(" %s:%g", g.ID, g.UtilizationPercent)
	}
	f.heartbeats = append(f.heartbeats, hb)
	return 12 * time.Second, f.errs["NodeUpdateStatus"]
}

func (f *fakeNodeServer) NodeAllocations(ctx context.Context, nodeID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQuery = q
	var out []*structs.Allocation
	for _, a := range f.allocs {
		if a.NodeID == nodeID {
			out = append(out, a)
		}
	}
	return out, f.meta, nil
}

func (f *fakeNodeServer) NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQuery = q
	out := map[string]uint64{}
	for _, a := range f.allocs {
		if a.NodeID == nodeID {
			out[a.ID] = a.AllocModifyIndex
		}
	}
	return out, f.meta, nil
}

func (f *fakeNodeServer) NodeFetchAllocs(ctx context.Context, nodeID string, ids []string, q *structs.QueryOptions) (*structs.NodeFetchAllocsHTTPResponse, structs.QueryMeta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, ids...)
	out := &structs.NodeFetchAllocsHTTPResponse{}
	for _, id := range ids {
		if a := f.allocs[id]; a != nil && a.NodeID == nodeID {
			out.Allocs = append(out.Allocs, &structs.NodeFetchedAlloc{Alloc: a})
		}
	}
	return out, f.meta, nil
}

func (f *fakeNodeServer) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, allocs...)
	return nil
}

func (f *fakeNodeServer) AuthorizeNode(nodeID, secret string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[nodeID]
	if n == nil {
		return fmt.Errorf("node %s: %w", nodeID, structs.ErrNotFound)
	}
	if subtle.ConstantTimeCompare([]byte(n.SecretID), []byte(secret)) != 1 {
		return fmt.Errorf("node %s: %w", nodeID, structs.ErrPermissionDenied)
	}
	return nil
}

func (f *fakeNodeServer) StateHash() (string, uint64, error) { return "abc123", 99, nil }

func nodeFixture(t *testing.T) (*fakeNodeServer, *httptest.Server) {
	t.Helper()
	fs, _, _ := fixture(t)
	fns := &fakeNodeServer{fakeServer: fs}
	fs.allocs["other-alloc"] = &structs.Allocation{ID: "other-alloc", NodeID: "node-2"}
	h, err := New(Config{Server: fns, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return fns, ts
}

func nodeReq(t *testing.T, method, url, secret, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set(structs.HeaderNodeSecret, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String(), resp.Header
}

func TestNodeRoutes(t *testing.T) {
	fns, ts := nodeFixture(t)

	// A new node registers and its secret is stored.
	code, body, _ := nodeReq(t, "PUT", ts.URL+"/v1/node/register", "", `{"Node":{"ID":"node-9","Name":"gpu9"},"SecretID":"sec9"}`)
	if code != 200 || !strings.Contains(body, `"HeartbeatTTL": 10000000000`) {
		t.Fatalf("register: %d %s", code, body)
	}
	if n := fns.registered[0]; n.ID != "node-9" || n.SecretID != "sec9" {
		t.Fatalf("registered %+v", n)
	}
	// Re-registering with the same secret is fine; with another it is not.
	if code, body, _ := nodeReq(t, "PUT", ts.URL+"/v1/node/register", "", `{"Node":{"ID":"node-9","Name":"gpu9"},"SecretID":"sec9"}`); code != 200 {
		t.Fatalf("re-register: %d %s", code, body)
	}
	if code, body, _ := nodeReq(t, "PUT", ts.URL+"/v1/node/register", "", `{"Node":{"ID":"node-9","Name":"evil"},"SecretID":"guess"}`); code != 403 {
		t.Fatalf("hijacking register: %d %s", code, body)
	}

	code, body, _ = nodeReq(t, "PUT", ts.URL+"/v1/node/node-9/heartbeat", "sec9", `{"Status":"ready"}`)
	if code != 200 || !strings.Contains(body, "12000000000") || fns.heartbeats[0] != "node-9=ready" {
		t.Fatalf("heartbeat: %d %s %v", code, body, fns.heartbeats)
	}
	// GPU samples ride along to the server.
	code, body, _ = nodeReq(t, "PUT", ts.URL+"/v1/node/node-9/heartbeat", "sec9", `{"Status":"ready","GPUs":[{"ID":"GPU-0","UtilizationPercent":42.5,"MemoryUsedMiB":100}]}`)
	if code != 200 || fns.heartbeats[1] != "node-9=ready GPU-0:42.5" {
		t.Fatalf("heartbeat with GPUs: %d %s %v", code, body, fns.heartbeats)
	}

	code, body, hdr := nodeReq(t, "GET", ts.URL+"/v1/node/node-1/allocations?index=5&wait=2s", "s3cret", "")
	var allocs []*structs.Allocation
	if code != 200 || json.Unmarshal([]byte(body), &allocs) != nil || len(allocs) != 1 || allocs[0].ID != "a1b2c3d4-0000" {
		t.Fatalf("allocations: %d %s", code, body)
	}
	if hdr.Get(headerIndex) != "42" || fns.lastQuery.MinQueryIndex != 5 || fns.lastQuery.MaxQueryTime != 2*time.Second {
		t.Errorf("blocking query: header %q, query %+v", hdr.Get(headerIndex), fns.lastQuery)
	}

	// An update naming an allocation the server does not know is a 404
	// naming it, and nothing is applied (the client retries the rest).
	code, body, _ = nodeReq(t, "POST", ts.URL+"/v1/node/node-1/allocations", "s3cret",
		`{"Allocs":[{"ID":"a1b2c3d4-0000","NodeID":"node-1","ClientStatus":"running"},{"ID":"gone-alloc","ClientStatus":"complete"}]}`)
	if code != 404 || !strings.Contains(body, "gone-alloc") || len(fns.updates) != 0 {
		t.Fatalf("update allocs with an unknown ID: %d %s %+v", code, body, fns.updates)
	}
	code, body, _ = nodeReq(t, "POST", ts.URL+"/v1/node/node-1/allocations", "s3cret",
		`{"Allocs":[{"ID":"a1b2c3d4-0000","NodeID":"node-1","ClientStatus":"running"}]}`)
	if code != 200 || len(fns.updates) != 1 || fns.updates[0].ClientStatus != "running" {
		t.Fatalf("update allocs: %d %s %+v", code, body, fns.updates)
	}

	code, body, hdr = nodeReq(t, "GET", ts.URL+"/v1/operator/state-hash", "", "")
	if code != 200 || !strings.Contains(body, `"Hash": "abc123"`) || hdr.Get(headerIndex) != "99" {
		t.Fatalf("state hash: %d %s", code, body)
	}
}

// TestNodeRoutesBadInput: every refusal names the problem and changes
// nothing.
func TestNodeRoutesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, secret, body string
		code                             int
		want                             string
	}{
		{"register empty body", "PUT", "/v1/node/register", "", "", 400, "empty"},
		{"register no node", "PUT", "/v1/node/register", "", `{"SecretID":"x"}`, 400, "Node: missing"},
		{"register no ID", "PUT", "/v1/node/register", "", `{"Node":{"Name":"n"},"SecretID":"x"}`, 400, "Node.ID"},
		{"register no secret", "PUT", "/v1/node/register", "", `{"Node":{"ID":"n"}}`, 400, "SecretID"},
		{"register header disagrees", "PUT", "/v1/node/register", "other", `{"Node":{"ID":"n"},"SecretID":"x"}`, 400, "header"},
		{"register bad JSON", "PUT", "/v1/node/register", "", `{"Node":`, 400, "malformed"},
		{"register node not an object", "PUT", "/v1/node/register", "", `{"Node":[1],"SecretID":"x"}`, 400, "Node"},
		{"heartbeat no secret", "PUT", "/v1/node/node-1/heartbeat", "", `{"Status":"ready"}`, 403, "X-Gpulayer-Node-Secret"},
		{"heartbeat wrong secret", "PUT", "/v1/node/node-1/heartbeat", "nope", `{"Status":"ready"}`, 403, "permission denied"},
		{"heartbeat unknown node", "PUT", "/v1/node/node-404/heartbeat", "x", `{"Status":"ready"}`, 404, "not found"},
		{"heartbeat no status", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{}`, 400, "Status"},
		{"heartbeat GPU utilisation over 100", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready","GPUs":[{"ID":"GPU-0","UtilizationPercent":101}]}`, 400, "GPUs[0].UtilizationPercent"},
		{"heartbeat GPU negative memory", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready","GPUs":[{"ID":"GPU-0","MemoryUsedMiB":-1}]}`, 400, "GPUs[0].MemoryUsedMiB"},
		{"heartbeat GPU without ID", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready","GPUs":[{"UtilizationPercent":1}]}`, 400, "GPUs[0].ID"},
		{"heartbeat GPU repeated", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready","GPUs":[{"ID":"a"},{"ID":"a"}]}`, 400, "GPUs[1].ID"},
		{"heartbeat GPU null", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready","GPUs":[null]}`, 400, "GPUs[0]"},
		{"heartbeat too many GPUs", "PUT", "/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready","GPUs":[` + strings.Repeat(`{"ID":"a"},`, structs.MaxHeartbeatGPUs) + `{"ID":"a"}]}`, 400, "at most"},
		{"allocations wrong secret", "GET", "/v1/node/node-1/allocations", "nope", "", 403, "permission denied"},
		{"allocations bad index", "GET", "/v1/node/node-1/allocations?index=-1", "s3cret", "", 400, "index"},
		{"update null alloc", "POST", "/v1/node/node-1/allocations", "s3cret", `{"Allocs":[null]}`, 400, "Allocs[0]"},
		{"update no ID", "POST", "/v1/node/node-1/allocations", "s3cret", `{"Allocs":[{"ClientStatus":"running"}]}`, 400, "Allocs[0].ID"},
		{"update names another node", "POST", "/v1/node/node-1/allocations", "s3cret", `{"Allocs":[{"ID":"x","NodeID":"node-2"}]}`, 400, "Allocs[0].NodeID"},
		{"update another node's alloc", "POST", "/v1/node/node-1/allocations", "s3cret", `{"Allocs":[{"ID":"other-alloc","ClientStatus":"failed"}]}`, 403, "not on node"},
		{"update wrong secret", "POST", "/v1/node/node-1/allocations", "nope", `{"Allocs":[]}`, 403, "permission denied"},
		{"client-allocs no secret", "GET", "/v1/node/node-1/client-allocs", "", "", 403, "X-Gpulayer-Node-Secret"},
		{"client-allocs wrong secret", "GET", "/v1/node/node-1/client-allocs", "nope", "", 403, "permission denied"},
		{"client-allocs bad index", "GET", "/v1/node/node-1/client-allocs?index=x", "s3cret", "", 400, "index"},
		{"fetch wrong secret", "POST", "/v1/node/node-1/client-allocs/fetch", "nope", `{"AllocIDs":["a"]}`, 403, "permission denied"},
		{"fetch no IDs", "POST", "/v1/node/node-1/client-allocs/fetch", "s3cret", `{"AllocIDs":[]}`, 400, "AllocIDs"},
		{"fetch empty ID", "POST", "/v1/node/node-1/client-allocs/fetch", "s3cret", `{"AllocIDs":[""]}`, 400, "AllocIDs[0]"},
		{"fetch too many IDs", "POST", "/v1/node/node-1/client-allocs/fetch", "s3cret", `{"AllocIDs":[` + strings.Repeat(`"a",`, structs.MaxFetchAllocs) + `"a"]}`, 400, "at most"},
		{"fetch IDs not a list", "POST", "/v1/node/node-1/client-allocs/fetch", "s3cret", `{"AllocIDs":"a"}`, 400, "AllocIDs"},
		{"update body too large", "POST", "/v1/node/node-1/allocations", "s3cret", `{"Allocs":[{"ID":"` + strings.Repeat("a", 5000) + `"}]}`, 413, "larger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fns, ts := nodeFixture(t)
			code, body, _ := nodeReq(t, tc.method, ts.URL+tc.path, tc.secret, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %s, want %d mentioning %q", tc.method, tc.path, code, body, tc.code, tc.want)
			}
			if len(fns.registered)+len(fns.heartbeats)+len(fns.updates)+len(fns.fetched) != 0 {
				t.Errorf("a refused request reached the server: %v %v %v %v", fns.registered, fns.heartbeats, fns.updates, fns.fetched)
			}
		})
	}
}

// TestClientOnlyHandler: without a server the handler serves the local
// client's logs, health and self, and nothing of the cluster.
func TestClientOnlyHandler(t *testing.T) {
	_, fc, _ := fixture(t)
	h, err := New(Config{Client: fc})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/status/health", 200, `"ok": true`},
		{"/v1/agent/self", 200, "node-1"},
		{"/v1/client/fs/logs/a1b2c3d4-0000?task=main&type=stdout&plain=true", 200, "hello"},
		{"/v1/client/fs/logs/a1b2c3d4-0000?type=stdout&plain=true", 400, "task parameter is required"},
		{"/v1/jobs", 404, "no route"},
		{"/v1/node/node-1/allocations", 404, "no route"},
	} {
		code, body, _ := nodeReq(t, "GET", ts.URL+tc.path, "", "")
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %s, want %d mentioning %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without Server and Client succeeded")
	}
}

// FuzzNodeRoutes sends arbitrary bodies, secrets and query strings to the
// node routes: never a panic or a 5xx, every refusal a JSON error, and a
// request with a wrong secret never reaches the server.
func FuzzNodeRoutes(f *testing.F) {
	f.Add(`{"Node":{"ID":"node-1","Name":"n"},"SecretID":"s3cret"}`, "s3cret", "index=1&wait=1ms")
	f.Add(`{"Status":"ready"}`, "", "")
	f.Add(`{"Allocs":[{"ID":"a1b2c3d4-0000","NodeID":"node-1"},null]}`, "s3cret", "index=x")
	f.Add(`{"Node":{"ID":""},"SecretID":""}`, "guess", "stale=maybe")
	f.Add(`[`, "\x00", "%zz")
	f.Add(`{"AllocIDs":["a1b2c3d4-0000","",null]}`, "s3cret", "index=2")
	fs := newFakeServer()
	fs.nodes["node-1"] = &structs.Node{ID: "node-1", Name: "laptop", SecretID: "s3cret"}
	fs.allocs["a1b2c3d4-0000"] = &structs.Allocation{ID: "a1b2c3d4-0000", NodeID: "node-1"}
	h, err := New(Config{Server: &fakeNodeServer{fakeServer: fs}, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, secret, query string) {
		for _, target := range []struct{ method, path string }{
			{"PUT", "/v1/node/register"}, {"PUT", "/v1/node/node-1/heartbeat"},
			{"GET", "/v1/node/node-1/allocations"}, {"POST", "/v1/node/node-1/allocations"},
			{"GET", "/v1/node/node-1/client-allocs"}, {"POST", "/v1/node/node-1/client-allocs/fetch"},
		} {
			req := httptest.NewRequest(target.method, "/", strings.NewReader(body))
			req.URL.Path = target.path
			req.URL.RawQuery = query
			if strings.ContainsAny(secret, "\r\n\x00") {
				continue // not a valid header value
			}
			req.Header.Set(structs.HeaderNodeSecret, secret)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s with %q: status %d: %s", target.method, target.path, body, rec.Code, rec.Body)
			}
			if rec.Code != http.StatusOK && !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("status %d without an error body: %s", rec.Code, rec.Body)
			}
			if target.path != "/v1/node/register" && secret != "s3cret" && rec.Code == http.StatusOK {
				t.Fatalf("%s %s succeeded with secret %q", target.method, target.path, secret)
			}
		}
	})
}

// TestNodeClientAllocRoutes: with the node's secret, client-allocs lists
// the node's allocation IDs with their AllocModifyIndex (another node's
// left out) and fetch returns the named ones.
func TestNodeClientAllocRoutes(t *testing.T) {
	fns, ts := nodeFixture(t)
	fns.mu.Lock()
	fns.allocs["mine"] = &structs.Allocation{ID: "mine", NodeID: "node-1", AllocModifyIndex: 7}
	fns.mu.Unlock()
	code, body, hdr := nodeReq(t, "GET", ts.URL+"/v1/node/node-1/client-allocs?index=3&wait=1s", "s3cret", "")
	if code != 200 {
		t.Fatalf("client-allocs = %d %s", code, body)
	}
	var ids structs.NodeClientAllocsHTTPResponse
	if err := json.Unmarshal([]byte(body), &ids); err != nil {
		t.Fatal(err)
	}
	if _, other := ids.Allocs["other-alloc"]; ids.Allocs["mine"] != 7 || other || hdr.Get("X-Gpulayer-Index") == "" {
		t.Fatalf("client-allocs = %s (index header %q)", body, hdr.Get("X-Gpulayer-Index"))
	}
	if fns.lastQuery == nil || fns.lastQuery.MinQueryIndex != 3 || fns.lastQuery.MaxQueryTime != time.Second {
		t.Fatalf("query options %+v", fns.lastQuery)
	}
	code, body, _ = nodeReq(t, "POST", ts.URL+"/v1/node/node-1/client-allocs/fetch", "s3cret", `{"AllocIDs":["mine","other-alloc"]}`)
	var got structs.NodeFetchAllocsHTTPResponse
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Allocs) != 1 || got.Allocs[0].Alloc.ID != "mine" {
		t.Fatalf("fetch = %d %s", code, body)
	}
}
