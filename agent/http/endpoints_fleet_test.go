package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// placeEndpointJobs registers a continuous node (and an opportunistic
// one) on srv and one endpoint job per name, 2 members each, and waits
// until the scheduler placed them all. A name starting with "opp-" opts
// in to opportunistic nodes and is placed on the opportunistic one only.
func placeEndpointJobs(t *testing.T, srv *server.Server, names ...string) {
	t.Helper()
	ctx := context.Background()
	cont, opp := statetest.Node(0), statetest.Node(0)
	cont.Name, opp.Name = "gpu-box", "laptop"
	opp.Availability = structs.AvailabilityOpportunistic
	for _, n := range []*structs.Node{cont, opp} {
		if _, err := srv.NodeRegister(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range names {
		job := statetest.Job()
		job.ID = name + "-job"
		tg := job.TaskGroups[0]
		tg.Count = 2
		tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
		// One router port per endpoint on a node: each its own.
		tg.Endpoint = &structs.Endpoint{Name: name, Port: 9000 + i, Model: "m", Revision: "r1"}
		if strings.HasPrefix(name, "opp-") {
			tg.Availability = structs.AvailabilityOpportunistic
			tg.Constraints = []*structs.Constraint{{LTarget: "${node.unique.id}", RTarget: opp.ID, Operand: "="}}
		}
		if _, err := srv.JobRegister(ctx, job); err != nil {
			t.Fatal(err)
		}
		waittest.NoErr(t, 20*time.Second, "placements of "+job.ID, func() (bool, error) {
			allocs, _, err := srv.JobAllocations(ctx, job.ID, nil)
			live := 0
			for _, a := range allocs {
				if !a.TerminalStatus() && a.NodeID != "" {
					live++
				}
			}
			return live == 2, err
		})
	}
}

func decodeJSON[T any](t *testing.T, body []byte) T {
	t.Helper()
	var out T
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("decode %T: %v: %.300s", out, err, body)
	}
	return out
}

// TestEndpointRoutesACL (issue 14): with ACLs on, no token may read or
// promote; a read-only token reads the fleet view and the aliases but may
// neither promote nor demote; a submit-job token does both, and the alias
// keeps its accessor and name.
func TestEndpointRoutesACL(t *testing.T) {
	f := newACLFixture(t)
	placeEndpointJobs(t, f.srv, "llm-a")
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	tok := func(s string) map[string]string { return map[string]string{HeaderNomadToken: s} }
	promote := []byte(`{"Endpoint":"llm-a"}`)
	steps := []struct {
		name, method, path string
		body               []byte
		hdr                map[string]string
		code               int
	}{
		{"list without a token", "GET", "/v1/endpoints", nil, nil, 403},
		{"aliases without a token", "GET", "/v1/endpoint/aliases", nil, nil, 403},
		{"info without a token", "GET", "/v1/endpoint/llm-a", nil, nil, 403},
		{"promote without a token", "PUT", "/v1/endpoint/alias/llm.primary", promote, nil, 403},
		{"promote with a read-only token", "PUT", "/v1/endpoint/alias/llm.primary", promote, tok(f.readTok.SecretID), 403},
		{"list with a read-only token", "GET", "/v1/endpoints", nil, tok(f.readTok.SecretID), 200},
		{"promote with a submit token", "PUT", "/v1/endpoint/alias/llm.primary", promote, tok(f.writeTok.SecretID), 200},
		{"promote in a namespace the writer lacks", "PUT", "/v1/endpoint/alias/llm.primary?namespace=prod", promote, tok(f.writeTok.SecretID), 403},
		{"aliases with a read-only token", "GET", "/v1/endpoint/aliases", nil, tok(f.readTok.SecretID), 200},
		{"info by alias with a read-only token", "GET", "/v1/endpoint/llm.primary", nil, tok(f.readTok.SecretID), 200},
		{"demote without a token", "DELETE", "/v1/endpoint/alias/llm.primary", nil, nil, 403},
		{"demote with a read-only token", "DELETE", "/v1/endpoint/alias/llm.primary", nil, tok(f.readTok.SecretID), 403},
		{"demote with a submit token", "DELETE", "/v1/endpoint/alias/llm.primary", nil, tok(f.writeTok.SecretID), 200},
	}
	for _, st := range steps {
		code, body, _ := send(t, st.method, ts.URL+st.path, st.body, st.hdr)
		if code != st.code {
			t.Fatalf("%s: %d %s, want %d", st.name, code, body, st.code)
		}
		switch st.name {
		case "list with a read-only token":
			list := decodeJSON[[]*api.EndpointView](t, body)
			if len(list) != 1 || list[0].Name != "llm-a" || list[0].Members != 2 || list[0].NodeName != "gpu-box" {
				t.Fatalf("list = %s", body)
			}
		case "promote with a submit token":
			resp := decodeJSON[api.EndpointAliasPromoteResponse](t, body)
			want := f.writeTok.AccessorID + " (writer)"
			if resp.Alias == nil || resp.Alias.PromotedBy != want || resp.Alias.Endpoint != "llm-a" || resp.Alias.PromotedAt.IsZero() {
				t.Fatalf("promote answer = %s, want PromotedBy %q", body, want)
			}
		case "info by alias with a read-only token":
			v := decodeJSON[api.EndpointView](t, body)
			if v.Name != "llm-a" || len(v.Aliases) != 1 || v.Aliases[0] != "llm.primary" {
				t.Fatalf("info by alias = %s", body)
			}
		}
	}
}

// TestEndpointRoutesBadInput: bounded, strictly decoded input, each
// refusal a 4xx naming what is wrong; promotion refused on an
// opportunistic node with the reason.
func TestEndpointRoutesBadInput(t *testing.T) {
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	placeEndpointJobs(t, c.Server(0), "llm-a", "opp-llm")
	ts := serve(t, c.Server(0))
	cases := []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"opportunistic node", "PUT", "/v1/endpoint/alias/llm.primary", `{"Endpoint":"opp-llm"}`, 400, "opportunistic"},
		{"unknown endpoint", "PUT", "/v1/endpoint/alias/llm.primary", `{"Endpoint":"nope"}`, 404, "no live job"},
		{"bad alias in path", "PUT", "/v1/endpoint/alias/LLM", `{"Endpoint":"llm-a"}`, 400, "alias"},
		{"alias ending in a dot", "PUT", "/v1/endpoint/alias/llm.", `{"Endpoint":"llm-a"}`, 400, "alias"},
		{"alias too long", "PUT", "/v1/endpoint/alias/" + strings.Repeat("a", 64), `{"Endpoint":"llm-a"}`, 400, "at most 63 bytes"},
		{"empty body", "PUT", "/v1/endpoint/alias/llm.primary", ``, 400, "empty"},
		{"unknown field", "PUT", "/v1/endpoint/alias/llm.primary", `{"Endpoint":"llm-a","Force":true}`, 400, "Force"},
		{"trailing data", "PUT", "/v1/endpoint/alias/llm.primary", `{"Endpoint":"llm-a"} {}`, 400, "data after"},
		{"not an object", "PUT", "/v1/endpoint/alias/llm.primary", `["llm-a"]`, 400, "malformed"},
		// GET /v1/endpoint/aliases answers the alias list, so an alias
		// of that name would resolve nowhere.
		{"alias named aliases", "PUT", "/v1/endpoint/alias/aliases", `{"Endpoint":"llm-a"}`, 400, `is reserved (GET /v1/endpoint/aliases`},
		{"bad endpoint name", "PUT", "/v1/endpoint/alias/llm.primary", `{"Endpoint":"LLM A"}`, 400, "Endpoint"},
		{"no endpoint", "PUT", "/v1/endpoint/alias/llm.primary", `{}`, 400, "Endpoint: must not be empty"},
		{"body over its bound", "PUT", "/v1/endpoint/alias/llm.primary", `{"Endpoint":"` + strings.Repeat("a", 5000) + `"}`, 413, "larger than"},
		{"info of a bad name", "GET", "/v1/endpoint/Bad_Name", ``, 400, "name"},
		{"info of an unknown name", "GET", "/v1/endpoint/nope", ``, 404, "nope"},
		{"demote what is not promoted", "DELETE", "/v1/endpoint/alias/llm.primary", ``, 404, "llm.primary"},
		{"bad prefix index", "GET", "/v1/endpoints?index=x", ``, 400, "index"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s, want %d containing %q", resp.StatusCode, body, tc.code, tc.want)
			}
		})
	}
	if resp, body := doReq(t, "GET", ts.URL+"/v1/endpoint/aliases", ""); resp.StatusCode != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("aliases after refusals: %d %s", resp.StatusCode, body)
	}
}

// TestEndpointAliasMoveOverHTTP (issue 14, Must show 4): an alias moved
// between two endpoints through PUT /v1/endpoint/alias/:alias while
// readers hammer GET /v1/endpoints and GET /v1/endpoint/aliases: no
// answer lists it on both endpoints or on none, and every alias list
// holds it once.
func TestEndpointAliasMoveOverHTTP(t *testing.T) {
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	placeEndpointJobs(t, c.Server(0), "llm-a", "llm-b")
	ts := serve(t, c.Server(0))
	put := func(ep string) {
		t.Helper()
		if resp, body := doReq(t, "PUT", ts.URL+"/v1/endpoint/alias/llm.primary", `{"Endpoint":"`+ep+`"}`); resp.StatusCode != 200 {
			t.Fatalf("promote onto %s: %d %s", ep, resp.StatusCode, body)
		}
	}
	put("llm-a")
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	fail := make(chan string, 8)
	read := func() string {
		code, body, _ := send(t, "GET", ts.URL+"/v1/endpoints", nil, nil)
		if code != 200 {
			return fmt.Sprintf("GET /v1/endpoints: %d %s", code, body)
		}
		var list []*api.EndpointView
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&list); err != nil {
			return err.Error()
		}
		holders := 0
		for _, v := range list {
			for _, a := range v.Aliases {
				if a == "llm.primary" {
					holders++
				}
			}
		}
		if holders != 1 {
			return fmt.Sprintf("llm.primary on %d endpoints: %s", holders, body)
		}
		code, body, _ = send(t, "GET", ts.URL+"/v1/endpoint/aliases", nil, nil)
		var as []*api.EndpointAlias
		if code != 200 || json.Unmarshal(body, &as) != nil || len(as) != 1 || (as[0].Endpoint != "llm-a" && as[0].Endpoint != "llm-b") {
			return fmt.Sprintf("GET /v1/endpoint/aliases: %d %s", code, body)
		}
		return ""
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if msg := read(); msg != "" {
					fail <- msg
					return
				}
				reads.Add(1)
			}
		}()
	}
	const moves = 100
	for i := range moves {
		put([]string{"llm-b", "llm-a"}[i%2])
	}
	stop.Store(true)
	wg.Wait()
	close(fail)
	for msg := range fail {
		t.Error(msg)
	}
	if reads.Load() == 0 {
		t.Fatal("no read completed")
	}
	t.Logf("%d moves, %d checked reads of both routes", moves, reads.Load())
	v := decodeJSON[api.EndpointView](t, []byte(mustGet(t, ts.URL+"/v1/endpoint/llm.primary")))
	if v.Name != "llm-a" || v.Members != 2 || v.Status != api.EndpointStatusDegraded && v.Status != api.EndpointStatusDown {
		t.Fatalf("llm.primary after the moves = %+v", v)
	}
	// The UI page lists both endpoints and the alias on its endpoint.
	page := getPage(t, ts.URL+"/ui/endpoints")
	if row := rowOf(t, page, "data-endpoint", "llm-a"); !strings.Contains(row, `data-alias="llm.primary"`) || !strings.Contains(row, "0/2") {
		t.Fatalf("llm-a row = %s", row)
	}
	if row := rowOf(t, page, "data-endpoint", "llm-b"); strings.Contains(row, "llm.primary") {
		t.Fatalf("llm-b row names the alias: %s", row)
	}
	if !strings.Contains(page, `href="/ui/endpoints" aria-current="page"`) {
		t.Fatal("the nav does not mark the endpoints page")
	}
}

func mustGet(t *testing.T, url string) string {
	t.Helper()
	resp, body := doReq(t, "GET", url, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}

// FuzzDecodeAliasPromote: any body either decodes to a promotion naming a
// valid endpoint, or is refused with an error; never a panic.
func FuzzDecodeAliasPromote(f *testing.F) {
	for _, s := range []string{`{"Endpoint":"llm-70b"}`, `{"Endpoint":""}`, `{"Endpoint":"a"} x`, `{"Endpoint":1}`, `{"X":1}`, ``, `null`,
		`{"Endpoint":"a.b-c"}`, `{"Endpoint":"-a"}`, `{"endpoint":"llm"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeAliasPromote(bytes.NewReader(body))
		if err != nil {
			if req != nil {
				t.Fatal("a refusal returned a request")
			}
			return
		}
		if structs.ValidateEndpointAliasName("Endpoint", req.Endpoint) != nil {
			t.Fatalf("accepted endpoint %q", req.Endpoint)
		}
	})
}
