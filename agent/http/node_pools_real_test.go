package http

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
)

// compact returns the JSON body without insignificant whitespace (the API
// indents its answers).
func compact(t *testing.T, body string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(body)); err != nil {
		return body
	}
	return b.String()
}

const poolBody = `{"NodePools":[{"Name":"gpu","Description":"a100s","Meta":{"team":"ml"},
 "Scaling":{"Provider":"docker","ProviderConfig":{"image":"gpulayer:dev"},"Min":0,"Max":4,
  "Shape":{"NodeClass":"a100","GPUCount":1,"GPUMemoryMB":81920,"MemoryModel":"discrete"},
  "Cooldown":30000000000,"IdleAfter":120000000000,"Idle":{"NoAllocations":true,"GPUUtilBelowPercent":5,"GPUUtilFor":600000000000}}}]}`

// TestNodePoolRoutes_RealServer drives Nomad's node pool API on a real
// server: write, list, info, nodes, jobs, delete, and the refusals, and
// checks the single-pool routes do not shadow the node routes.
func TestNodePoolRoutes_RealServer(t *testing.T) {
	c := servertest.NewCluster(t, 1, servertest.WithConfig(func(cfg *server.Config) {
		cfg.Provision.DockerImages = []string{"gpulayer:dev"}
	}))
	c.WaitForLeader()
	srv := c.Server(0)
	ts := serve(t, routedServer{Server: srv, mu: &sync.Mutex{}, urls: map[string]string{}})

	resp, got := doReq(t, "PUT", ts.URL+"/v1/node/pools", poolBody)
	if resp.StatusCode != 200 || resp.Header.Get("X-Nomad-Index") == "" {
		t.Fatalf("PUT pools = %d %s", resp.StatusCode, got)
	}
	resp, got = doReq(t, "GET", ts.URL+"/v1/node/pools", "")
	var pools []*api.NodePool
	if err := json.Unmarshal([]byte(got), &pools); err != nil || resp.StatusCode != 200 || len(pools) != 3 {
		t.Fatalf("GET pools = %d %s (%v)", resp.StatusCode, got, err)
	}
	if pools[0].Name != "all" || pools[1].Name != "default" || pools[2].Name != "gpu" {
		t.Fatalf("pool order = %s", got)
	}
	_, got = doReq(t, "GET", ts.URL+"/v1/node/pools?prefix=de", "")
	got = compact(t, got)
	if !strings.Contains(got, `"Name":"default"`) || strings.Contains(got, `"gpu"`) {
		t.Fatalf("prefix list = %s", got)
	}
	resp, got = doReq(t, "GET", ts.URL+"/v1/node/pool/gpu", "")
	var p api.NodePool
	if err := json.Unmarshal([]byte(got), &p); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET pool = %d %s", resp.StatusCode, got)
	}
	if p.Scaling == nil || p.Scaling.Max != 4 || p.Scaling.Shape.GPUMemoryMB != 81920 || p.Scaling.Idle.GPUUtilBelowPercent != 5 || p.Meta["team"] != "ml" || p.CreateIndex == 0 {
		t.Fatalf("pool = %s", got)
	}
	if resp, got := doReq(t, "GET", ts.URL+"/v1/node/pool/nope", ""); resp.StatusCode != 404 {
		t.Fatalf("GET unknown pool = %d %s", resp.StatusCode, got)
	}

	n := statetest.Node(1)
	n.NodePool = "gpu"
	if _, err := srv.NodeRegister(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	_, got = doReq(t, "GET", ts.URL+"/v1/node/pool/gpu/nodes", "")
	got = compact(t, got)
	if !strings.Contains(got, n.ID) || !strings.Contains(got, `"NodePool":"gpu"`) {
		t.Fatalf("pool nodes = %s", got)
	}
	_, got = doReq(t, "GET", ts.URL+"/v1/node/"+n.ID, "")
	got = compact(t, got)
	if !strings.Contains(got, `"NodePool":"gpu"`) {
		t.Fatalf("node read = %s", got)
	}
	// The node routes under /v1/node/{id}/ still route (to the node
	// secret check).
	if resp, got := doReq(t, "GET", ts.URL+"/v1/node/"+n.ID+"/allocations", ""); resp.StatusCode != 403 || !strings.Contains(got, "Node-Secret") {
		t.Fatalf("node allocations = %d %s", resp.StatusCode, got)
	}
	job := strings.Replace(strings.ReplaceAll(realJobBody, "%s", "inpool"), `"Type"`, `"NodePool":"gpu","Type"`, 1)
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/jobs", job); resp.StatusCode != 200 {
		t.Fatalf("register job in gpu = %d %s", resp.StatusCode, got)
	}
	_, got = doReq(t, "GET", ts.URL+"/v1/node/pool/gpu/jobs", "")
	got = compact(t, got)
	if !strings.Contains(got, `"ID":"inpool"`) || !strings.Contains(got, `"NodePool":"gpu"`) {
		t.Fatalf("pool jobs = %s", got)
	}
	_, got = doReq(t, "GET", ts.URL+"/v1/job/inpool", "")
	got = compact(t, got)
	if !strings.Contains(got, `"NodePool":"gpu"`) {
		t.Fatalf("job read = %s", got)
	}
	missing := strings.Replace(strings.ReplaceAll(realJobBody, "%s", "lost"), `"Type"`, `"NodePool":"nope","Type"`, 1)
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/jobs", missing); resp.StatusCode != 400 || !strings.Contains(got, `node pool \"nope\" does not exist`) {
		t.Fatalf("register job in missing pool = %d %s", resp.StatusCode, got)
	}

	for _, tc := range []struct{ name, method, path, body, want string }{
		{"unknown field", "PUT", "/v1/node/pools", `{"NodePools":[{"Name":"x","Bogus":1}]}`, "Bogus"},
		{"no pools", "PUT", "/v1/node/pools", `{}`, "no NodePools"},
		{"null pool", "POST", "/v1/node/pools", `{"NodePools":[null]}`, "must not be null"},
		{"scheduler config", "PUT", "/v1/node/pools", `{"NodePools":[{"Name":"x","SchedulerConfiguration":{"SchedulerAlgorithm":"spread"}}]}`, "SchedulerConfiguration"},
		{"modify all", "PUT", "/v1/node/pools", `{"NodePools":[{"Name":"all","Description":"x"}]}`, "cannot be modified"},
		{"bad name", "PUT", "/v1/node/pools", `{"NodePools":[{"Name":"a b"}]}`, "name"},
		{"bad provider", "PUT", "/v1/node/pools", `{"NodePools":[{"Name":"x","Scaling":{"Provider":"aws","Max":1}}]}`, `provider \"aws\"`},
		{"delete default", "DELETE", "/v1/node/pool/default", "", "built-in"},
		{"delete in use", "DELETE", "/v1/node/pool/gpu", "", "in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, got := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != 400 || !strings.Contains(got, tc.want) {
				t.Fatalf("%s %s = %d %s, want 400 naming %q", tc.method, tc.path, resp.StatusCode, got, tc.want)
			}
		})
	}
	if resp, got := doReq(t, "DELETE", ts.URL+"/v1/node/pool/nope", ""); resp.StatusCode != 404 {
		t.Fatalf("delete unknown = %d %s", resp.StatusCode, got)
	}
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/node/pools", `{"NodePools":[{"Name":"spare"}]}`); resp.StatusCode != 200 {
		t.Fatalf("PUT spare = %d %s", resp.StatusCode, got)
	}
	if resp, got := doReq(t, "DELETE", ts.URL+"/v1/node/pool/spare", ""); resp.StatusCode != 200 {
		t.Fatalf("delete spare = %d %s", resp.StatusCode, got)
	}
	if resp, _ := doReq(t, "GET", ts.URL+"/v1/node/pool/spare", ""); resp.StatusCode != 404 {
		t.Fatalf("spare after delete = %d", resp.StatusCode)
	}
}
