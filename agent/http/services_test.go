package http

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// servicesFixture is a real server behind the HTTP API with two nodes, A
// running one allocation of job "web", and B running nothing.
type servicesFixture struct {
	url   string
	s     *server.Server
	a, b  *structs.Node
	alloc *structs.Allocation
}

func newServicesFixture(t testing.TB) *servicesFixture {
	t.Helper()
	s := servertest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	h, err := New(Config{Server: s, MaxBodyBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	f := &servicesFixture{s: s, url: ts.URL, a: statetest.Node(0)}
	if _, err := s.NodeRegister(ctx, f.a); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(0)
	job.ID, job.Name = "web", "web"
	job.TaskGroups[0].Networks = []*structs.NetworkResource{{ReservedPorts: []structs.Port{{Label: "http", Value: 20001}}}}
	job.TaskGroups[0].Services = []*structs.Service{{Name: "web", PortLabel: "http"}}
	if _, err := s.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	waittest.NoErr(t, 10*time.Second, "an allocation of web", func() (bool, error) {
		allocs, _, err := s.JobAllocations(ctx, "web", nil)
		if len(allocs) == 1 {
			f.alloc = allocs[0]
		}
		return f.alloc != nil, err
	})
	f.b = statetest.Node(0)
	if _, err := s.NodeRegister(ctx, f.b); err != nil {
		t.Fatal(err)
	}
	return f
}

// post sends a NodeServicesRequest for nodeID with secret.
func (f *servicesFixture) post(t *testing.T, nodeID, secret string, req *structs.NodeServicesRequest) (int, string) {
	t.Helper()
	body, _ := json.Marshal(req)
	r, err := http.NewRequest(http.MethodPost, f.url+"/v1/node/"+nodeID+"/services", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(structs.HeaderNodeSecret, secret)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

func (f *servicesFixture) reg(port int) *structs.ServiceRegistration {
	return &structs.ServiceRegistration{ID: structs.ServiceRegistrationID(f.alloc.ID, f.alloc.TaskGroup, "web", "http"), ServiceName: "web",
		AllocID: f.alloc.ID, NodeID: f.a.ID, Address: f.a.HostIP(), Port: port, Tags: []string{"v1"}}
}

func (f *servicesFixture) instances(t *testing.T) []*api.ServiceRegistration {
	t.Helper()
	resp, body := doReq(t, "GET", f.url+"/v1/service/web", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/service/web: %d %s", resp.StatusCode, body)
	}
	var out []*api.ServiceRegistration
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExploitNodeCannotRegisterAnotherNodesServices: a node with a valid
// secret of its own can neither register nor remove service instances of
// an allocation on another node, nor speak as that node; the owner can,
// and the server fills the job and namespace from the allocation, not
// from what the client sent.
func TestExploitNodeCannotRegisterAnotherNodesServices(t *testing.T) {
	f := newServicesFixture(t)

	// B, with its own secret, registers A's allocation.
	forged := f.reg(20001)
	forged.NodeID = f.b.ID
	if code, body := f.post(t, f.b.ID, f.b.SecretID, &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{forged}}); code != http.StatusForbidden {
		t.Fatalf("B registering A's allocation: %d %s", code, body)
	}
	// B speaks for A with its own secret.
	if code, body := f.post(t, f.a.ID, f.b.SecretID, &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{f.reg(20001)}}); code != http.StatusForbidden {
		t.Fatalf("B posting as A: %d %s", code, body)
	}
	// No secret at all.
	if code, body := f.post(t, f.a.ID, "", &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{f.reg(20001)}}); code != http.StatusForbidden {
		t.Fatalf("no secret: %d %s", code, body)
	}
	if got := f.instances(t); len(got) != 0 {
		t.Fatalf("registered by a hostile node: %+v", got)
	}

	// A registers its own allocation; a lie about the job and namespace
	// is overwritten from the allocation.
	own := f.reg(20001)
	own.JobID, own.Namespace, own.Datacenter = "other-job", "other-ns", "elsewhere"
	if code, body := f.post(t, f.a.ID, f.a.SecretID, &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{own}}); code != 200 {
		t.Fatalf("A registering its own allocation: %d %s", code, body)
	}
	got := f.instances(t)
	if len(got) != 1 || got[0].JobID != "web" || got[0].Namespace != "default" || got[0].NodeID != f.a.ID || got[0].Datacenter != "dc1" || got[0].Port != 20001 {
		t.Fatalf("registration %+v", got)
	}

	// A resend of the same instance writes nothing (no Raft entry).
	idx := f.s.Stats()["raft.last_log_index"]
	if code, body := f.post(t, f.a.ID, f.a.SecretID, &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{own}}); code != 200 {
		t.Fatalf("resend: %d %s", code, body)
	}
	if again := f.s.Stats()["raft.last_log_index"]; again != idx || idx == "" {
		t.Fatalf("a resend of an unchanged instance appended to the Raft log: last index %s, was %s", again, idx)
	}

	// B removes A's instance, by ID and by allocation.
	if code, body := f.post(t, f.b.ID, f.b.SecretID, &structs.NodeServicesRequest{Delete: []string{own.ID}}); code != http.StatusForbidden {
		t.Fatalf("B deleting A's registration: %d %s", code, body)
	}
	if code, body := f.post(t, f.b.ID, f.b.SecretID, &structs.NodeServicesRequest{DeleteAllocs: []string{f.alloc.ID}}); code != http.StatusForbidden {
		t.Fatalf("B deleting A's allocation's registrations: %d %s", code, body)
	}
	if got := f.instances(t); len(got) != 1 {
		t.Fatalf("a hostile node removed an instance: %+v", got)
	}

	// A removes its own.
	if code, body := f.post(t, f.a.ID, f.a.SecretID, &structs.NodeServicesRequest{Delete: []string{own.ID}}); code != 200 {
		t.Fatalf("A deleting its own: %d %s", code, body)
	}
	if got := f.instances(t); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
}

// TestExploitNodeCannotPointServiceElsewhere: a node with its own
// allocation can register only the instances that allocation's job
// declares, at the port the allocation holds and the node's address. It
// cannot take over another node's registration by sending its ID (the
// upsert overwrote it by ID), invent a service name in the allocation's
// namespace, or point the service at an arbitrary host:port that
// consumers of the registry and the check runner would then call.
func TestExploitNodeCannotPointServiceElsewhere(t *testing.T) {
	f := newServicesFixture(t)
	if code, body := f.post(t, f.a.ID, f.a.SecretID, &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{f.reg(20001)}}); code != 200 {
		t.Fatalf("A registering its own allocation: %d %s", code, body)
	}
	want := f.instances(t)
	if len(want) != 1 {
		t.Fatalf("registrations %+v", want)
	}
	cases := map[string]func(r *structs.ServiceRegistration){
		"another port":     func(r *structs.ServiceRegistration) { r.Port = 6379 },
		"another host":     func(r *structs.ServiceRegistration) { r.Address = "169.254.169.254" },
		"an invented name": func(r *structs.ServiceRegistration) { r.ServiceName = "db" },
		"an invented instance": func(r *structs.ServiceRegistration) {
			r.ID, r.ServiceName = structs.ServiceRegistrationID(r.AllocID, "web", "db", ""), "db"
		},
		"another alloc's ID": func(r *structs.ServiceRegistration) {
			r.ID = structs.ServiceRegistrationID("00000000-0000-0000-0000-000000000000", "web", "web", "http")
		},
	}
	for name, mutate := range cases {
		r := f.reg(20001)
		mutate(r)
		if code, body := f.post(t, f.a.ID, f.a.SecretID, &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{r}}); code != http.StatusForbidden || !strings.Contains(body, "service registration Upsert[0]") {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	if got := f.instances(t); len(got) != 1 || got[0].Address != want[0].Address || got[0].Port != 20001 || got[0].ID != want[0].ID {
		t.Fatalf("after hostile upserts: %+v", got)
	}
}

// TestServicesRoutesBadInput: bad bodies and unknown allocations are
// 4xx answers naming the problem, and change nothing.
func TestServicesRoutesBadInput(t *testing.T) {
	f := newServicesFixture(t)
	bad := func(mut func(r *structs.ServiceRegistration)) *structs.NodeServicesRequest {
		r := f.reg(20001)
		mut(r)
		return &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{r}}
	}
	cases := []struct {
		name string
		req  *structs.NodeServicesRequest
		code int
		want string
	}{
		{"port out of range", bad(func(r *structs.ServiceRegistration) { r.Port = 70000 }), 400, "Port: must be 0-65535"},
		{"bad service name", bad(func(r *structs.ServiceRegistration) { r.ServiceName = "a b" }), 400, "ServiceName"},
		{"no ID", bad(func(r *structs.ServiceRegistration) { r.ID = "" }), 400, "ID: must be"},
		{"unknown allocation", bad(func(r *structs.ServiceRegistration) { r.AllocID = "no-such-alloc" }), 404, "no-such-alloc"},
		{"too many tags", bad(func(r *structs.ServiceRegistration) { r.Tags = make([]string, 40) }), 400, "tags: at most 32"},
		{"null registration", &structs.NodeServicesRequest{Upsert: []*structs.ServiceRegistration{nil}}, 400, "Upsert[0]"},
		{"batch too large", &structs.NodeServicesRequest{Delete: make([]string, structs.MaxNodeServicesBatch+1)}, 400, "at most 1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.post(t, f.a.ID, f.a.SecretID, tc.req)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s, want %d naming %q", code, body, tc.code, tc.want)
			}
			if got := f.instances(t); len(got) != 0 {
				t.Fatalf("a refused request registered %+v", got)
			}
		})
	}
	// A body that is not JSON.
	r, _ := http.NewRequest(http.MethodPost, f.url+"/v1/node/"+f.a.ID+"/services", strings.NewReader("{"))
	r.Header.Set(structs.HeaderNodeSecret, f.a.SecretID)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("malformed body: %d", resp.StatusCode)
	}
	// Deleting an unknown registration through the operator route.
	if resp, body := doReq(t, "DELETE", f.url+"/v1/service/web/nope", ""); resp.StatusCode != 404 {
		t.Fatalf("delete unknown: %d %s", resp.StatusCode, body)
	}
	// The list of an empty cluster is an empty JSON list.
	if resp, body := doReq(t, "GET", f.url+"/v1/services", ""); resp.StatusCode != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("empty list: %d %q", resp.StatusCode, body)
	}
}

// FuzzNodeServices posts arbitrary bodies to a real server's node
// services route as node A: never a 5xx, every refusal an error body, and
// whatever is stored names A's own allocation on A, whatever the body
// claimed.
func FuzzNodeServices(f *testing.F) {
	f.Add(`{"Upsert":[{"ID":"x","ServiceName":"web","AllocID":"ALLOC","NodeID":"B","Port":1,"Tags":["a"]}]}`)
	f.Add(`{"Delete":["x"],"DeleteAllocs":["ALLOC","nope"]}`)
	f.Add(`{"Upsert":[null,{}]}`)
	f.Add(`{"Upsert":[{"ID":"y","ServiceName":"web","AllocID":"ALLOC","Port":-1,"Namespace":"other","JobID":"j"}]}`)
	f.Add(`[`)
	fx := newServicesFixture(f)
	f.Fuzz(func(t *testing.T, body string) {
		body = strings.ReplaceAll(body, "ALLOC", fx.alloc.ID)
		r, err := http.NewRequest(http.MethodPost, fx.url+"/v1/node/"+fx.a.ID+"/services", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set(structs.HeaderNodeSecret, fx.a.SecretID)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d for %q: %s", resp.StatusCode, body, b)
		}
		if resp.StatusCode != 200 && !strings.Contains(string(b), `"error"`) {
			t.Fatalf("status %d without an error body: %s", resp.StatusCode, b)
		}
		regs, _, err := fx.s.ServiceRegistrations(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, reg := range regs {
			if reg.NodeID != fx.a.ID || reg.AllocID != fx.alloc.ID || reg.JobID != "web" || reg.Namespace != "default" {
				t.Fatalf("stored %+v from %q", reg, body)
			}
		}
	})
}
