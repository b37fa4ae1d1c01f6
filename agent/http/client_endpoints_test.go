package http

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// endpointsClient is a fake client running endpoint routers.
type endpointsClient struct {
	fakeClient
	eps []*structs.ClientEndpointStatus
}

func (c *endpointsClient) Endpoints() []*structs.ClientEndpointStatus { return c.eps }

// TestClientEndpointsLocalProxiedAndNamespaced: the route answers from the
// agent's own client, or proxies to the named node's agent, and lists only
// the routers of the request's namespace.
func TestClientEndpointsLocalProxiedAndNamespaced(t *testing.T) {
	ep := func(ns, job string) *structs.ClientEndpointStatus {
		return &structs.ClientEndpointStatus{Namespace: ns, JobID: job, Endpoint: "llm-" + job, Admitted: 1, Members: []*structs.ClientEndpointMember{{
			AllocID: "a-" + job, Admitted: true, Identity: structs.EndpointIdentity{JobVersion: 2, ArtifactDigest: "d"},
			Processes: []*structs.EndpointMemberProcess{{Task: "srv", Driver: "native", PID: 42, Alive: true, RSSMiB: 12.5}}}}}
	}
	remote := &endpointsClient{fakeClient: fakeClient{node: &structs.Node{ID: "node-2"}}, eps: []*structs.ClientEndpointStatus{ep("default", "r")}}
	remoteAPI, err := New(Config{Client: remote})
	if err != nil {
		t.Fatal(err)
	}
	remoteTS := httptest.NewServer(remoteAPI)
	t.Cleanup(remoteTS.Close)
	fs := newFakeServer()
	fs.nodes["node-1"] = &structs.Node{ID: "node-1"}
	fs.nodes["node-2"] = &structs.Node{ID: "node-2", HTTPAddr: strings.TrimPrefix(remoteTS.URL, "http://")}
	fs.nodes["node-3"] = &structs.Node{ID: "node-3", HTTPAddr: "127.0.0.1:1"}
	local := &endpointsClient{fakeClient: fakeClient{node: fs.nodes["node-1"]}, eps: []*structs.ClientEndpointStatus{ep("default", "l"), ep("prod", "p")}}
	h, err := New(Config{Server: fs, Client: local})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	cases := []struct {
		query string
		code  int
		jobs  string
	}{
		{"", 200, "l"},
		{"?namespace=prod", 200, "p"},
		{"?namespace=other", 200, ""},
		{"?node_id=node-1", 200, "l"},
		{"?node_id=node-2", 200, "r"},
		{"?node_id=node-2&namespace=prod", 200, ""},
		{"?node_id=node-3", 502, ""},
		{"?node_id=nope", 404, ""},
	}
	for _, tc := range cases {
		resp, body := doReq(t, "GET", ts.URL+"/v1/client/endpoints"+tc.query, "")
		if resp.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d: %s", tc.query, resp.StatusCode, tc.code, body)
			continue
		}
		if tc.code != 200 {
			continue
		}
		var out []*api.ClientEndpoint
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("%s: %v: %s", tc.query, err, body)
		}
		var jobs []string
		for _, e := range out {
			jobs = append(jobs, e.JobID)
			if p := e.Members[0].Processes[0]; p.PID != 42 || !p.Alive || p.RSSMiB != 12.5 || e.Members[0].JobVersion != 2 {
				t.Errorf("%s: member %+v process %+v", tc.query, e.Members[0], p)
			}
		}
		if strings.Join(jobs, ",") != tc.jobs {
			t.Errorf("%s: jobs %v, want %q", tc.query, jobs, tc.jobs)
		}
	}
	// A forwarded request is never forwarded again.
	req, _ := http.NewRequest("GET", remoteTS.URL+"/v1/client/endpoints?node_id=node-9", nil)
	req.Header.Set(headerForwarded, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("forwarded request for another node: %s", resp.Status)
	}
}
