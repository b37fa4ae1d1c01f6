package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// endpointAPI serves two endpoints, llm-70b (serving, 2 of 3 members
// admitted, alias llm.primary) and llm-8b (down, not placed), and records
// the alias writes it gets.
func endpointAPI(t *testing.T, writes *[]string) *httptest.Server {
	big := &api.EndpointView{Namespace: "default", Name: "llm-70b", JobID: "llama", JobVersion: 3, TaskGroup: "serve", Model: "llama-3-70b",
		Revision: "2024-07", Port: 9000, Count: 3, NodeID: "ef567890-1111-2222-3333-444455556666", NodeName: "gpu-box",
		NodeAvailability: "continuous", Members: 3, Admitted: 2, Aliases: []string{"llm.primary"}, Status: api.EndpointStatusServing,
		MemberList: []*api.EndpointMemberView{
			{AllocID: "aaaa1111-0000-0000-0000-000000000000", Index: 0, ClientStatus: "running", Admitted: true,
				Identity: api.EndpointMemberIdentity{JobVersion: 3, ArtifactDigest: "sha256:0123456789abcdef0123"}},
			{AllocID: "bbbb2222-0000-0000-0000-000000000000", Index: 1, ClientStatus: "running", Admitted: true,
				Identity: api.EndpointMemberIdentity{JobVersion: 3, ArtifactDigest: "sha256:0123456789abcdef0123"}},
			{AllocID: "cccc3333-0000-0000-0000-000000000000", Index: 2, ClientStatus: "running", Reason: "image digest differs from the admitted members",
				Identity: api.EndpointMemberIdentity{JobVersion: 3, ArtifactDigest: "sha256:fedcba9876543210fedc"}},
		}}
	small := &api.EndpointView{Namespace: "default", Name: "llm-8b", JobID: "llama-small", JobVersion: 0, TaskGroup: "serve", Model: "llama-3-8b",
		Port: 9001, Count: 2, Status: api.EndpointStatusDown, MemberList: []*api.EndpointMemberView{}, Aliases: []string{}}
	alias := &api.EndpointAlias{Namespace: "default", Name: "llm.primary", Endpoint: "llm-70b", JobID: "llama",
		PromotedBy: "4f9a-accessor (ops)", PromotedAt: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), CreateIndex: 40, ModifyIndex: 42}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/endpoints", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.EndpointView{big, small})
	})
	mux.HandleFunc("GET /v1/endpoint/aliases", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.EndpointAlias{alias})
	})
	mux.HandleFunc("GET /v1/endpoint/{name}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("name") {
		case "llm-70b", "llm.primary":
			json.NewEncoder(w).Encode(big)
		case "llm-8b":
			json.NewEncoder(w).Encode(small)
		default:
			w.WriteHeader(404)
			w.Write([]byte(`endpoint or alias "` + r.PathValue("name") + `" in namespace "default": not found`))
		}
	})
	mux.HandleFunc("PUT /v1/endpoint/alias/{alias}", func(w http.ResponseWriter, r *http.Request) {
		var req api.EndpointAliasPromoteRequest
		json.NewDecoder(r.Body).Decode(&req)
		*writes = append(*writes, "promote "+r.PathValue("alias")+" "+req.Endpoint+" ns="+r.URL.Query().Get("namespace"))
		if req.Endpoint == "llm-laptop" {
			w.WriteHeader(400)
			w.Write([]byte(`endpoint "llm-laptop": member a1 runs on node "laptop" (n1): invalid: the endpoint's node is opportunistic; only a continuous node may back a promoted alias`))
			return
		}
		a := *alias
		a.Name, a.Endpoint = r.PathValue("alias"), req.Endpoint
		json.NewEncoder(w).Encode(api.EndpointAliasPromoteResponse{Alias: &a, Index: 42})
	})
	mux.HandleFunc("DELETE /v1/endpoint/alias/{alias}", func(w http.ResponseWriter, r *http.Request) {
		*writes = append(*writes, "demote "+r.PathValue("alias"))
		w.Write([]byte(`{}`))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestEndpointStatusGolden: the fleet table and the detail of an alias
// (which endpoint, host, admitted members, version, who promoted it).
func TestEndpointStatusGolden(t *testing.T) {
	ts := endpointAPI(t, new([]string))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"endpoint_status_list.golden", []string{"endpoint", "status"}},
		{"endpoint_status.golden", []string{"endpoint", "status", "llm.primary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, ts.URL, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			golden(t, tc.name, r.out)
		})
	}
	r := runCmd(t, ts.URL, "endpoint", "status", "-json", "llm-8b")
	var v api.EndpointView
	if r.code != 0 || json.Unmarshal([]byte(r.out), &v) != nil || v.Name != "llm-8b" || v.Status != "down" {
		t.Fatalf("-json: exit %d %s %s", r.code, r.out, r.err)
	}
	if r := runCmd(t, ts.URL, "endpoint", "status", "nope"); r.code != 1 || !strings.Contains(r.err, `endpoint or alias "nope" in namespace "default": not found`) {
		t.Fatalf("unknown: exit %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "endpoint", "status", "a", "b"); r.code != 1 || !strings.Contains(r.err, "at most one argument") {
		t.Fatalf("two args: exit %d %s", r.code, r.err)
	}
}

// TestEndpointPromoteDemote: options before or after the alias, the
// namespace sent, a server refusal shown with its reason, and demotion.
func TestEndpointPromoteDemote(t *testing.T) {
	var writes []string
	ts := endpointAPI(t, &writes)
	r := runCmd(t, ts.URL, "endpoint", "promote", "llm.primary", "-endpoint", "llm-70b")
	if r.code != 0 || strings.TrimSpace(r.out) != `Alias "llm.primary" now resolves to endpoint "llm-70b" (job "llama", promoted by 4f9a-accessor (ops) at index 42)` {
		t.Fatalf("promote: exit %d %q %s", r.code, r.out, r.err)
	}
	if r := runCmd(t, ts.URL, "endpoint", "promote", "-namespace", "prod", "-endpoint=llm-8b", "llm.canary"); r.code != 0 {
		t.Fatalf("options first: exit %d %s", r.code, r.err)
	}
	r = runCmd(t, ts.URL, "endpoint", "promote", "llm.primary", "-endpoint", "llm-laptop")
	if r.code != 1 || !strings.Contains(r.err, "opportunistic") || !strings.Contains(r.err, `node "laptop"`) {
		t.Fatalf("refused: exit %d %s", r.code, r.err)
	}
	for _, bad := range [][]string{{"endpoint", "promote", "llm.primary"}, {"endpoint", "promote", "-endpoint", "x"}, {"endpoint", "promote", "a", "b", "-endpoint", "x"}} {
		if r := runCmd(t, ts.URL, bad...); r.code != 1 || r.err == "" {
			t.Fatalf("%v: exit %d %s", bad, r.code, r.err)
		}
	}
	if r := runCmd(t, ts.URL, "endpoint", "demote", "llm.primary"); r.code != 0 || strings.TrimSpace(r.out) != `Alias "llm.primary" demoted` {
		t.Fatalf("demote: exit %d %s %s", r.code, r.out, r.err)
	}
	want := []string{"promote llm.primary llm-70b ns=", "promote llm.canary llm-8b ns=prod", "promote llm.primary llm-laptop ns=", "demote llm.primary"}
	if strings.Join(writes, "|") != strings.Join(want, "|") {
		t.Fatalf("writes = %q, want %q", writes, want)
	}
}
