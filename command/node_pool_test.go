package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// poolAPI serves Nomad's node pool routes for the pools "all", "default"
// and "gpu" (with a scaling policy), one node and one job in "gpu", and
// records the pools written and deleted.
type poolAPI struct {
	mu      sync.Mutex
	written []*api.NodePool
	deleted []string
}

func (p *poolAPI) serve(t *testing.T) *httptest.Server {
	pools := []*api.NodePool{
		{Name: "all", Description: "Node pool with all nodes in the cluster."},
		{Name: "default", Description: "Default node pool."},
		{Name: "gpu", Description: "A100 hosts on demand", Meta: map[string]string{"team": "ml", "env": "dev"}, CreateIndex: 7, ModifyIndex: 9,
			Scaling: &api.NodePoolScalingPolicy{Provider: "docker", ProviderConfig: map[string]string{"image": "gpulayer:dev"}, Min: 0, Max: 4,
				Cooldown: 30 * time.Second, IdleAfter: 2 * time.Minute,
				Shape: api.NodePoolShape{NodeClass: "a100", GPUModel: "NVIDIA A100-SXM4-80GB", GPUCount: 1, GPUMemoryMB: 81920, MemoryModel: "discrete"},
				Idle:  api.NodePoolIdleRule{NoAllocations: true, GPUUtilBelowPercent: 5, GPUUtilFor: 10 * time.Minute}}},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node/pools", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.NodePool{}
		for _, pl := range pools {
			if strings.HasPrefix(pl.Name, r.URL.Query().Get("prefix")) {
				out = append(out, pl)
			}
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /v1/node/pool/{name}", func(w http.ResponseWriter, r *http.Request) {
		for _, pl := range pools {
			if pl.Name == r.PathValue("name") {
				json.NewEncoder(w).Encode(pl)
				return
			}
		}
		http.Error(w, `{"error":"node pool not found"}`, http.StatusNotFound)
	})
	mux.HandleFunc("PUT /v1/node/pools", func(w http.ResponseWriter, r *http.Request) {
		var req api.NodePoolUpsertRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.written = append(p.written, req.NodePools...)
		p.mu.Unlock()
		w.Header().Set("X-Gpulayer-Index", "12")
		w.Write([]byte("{}"))
	})
	mux.HandleFunc("DELETE /v1/node/pool/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") == "default" {
			http.Error(w, `{"error":"invalid: node pool \"default\" is built-in and cannot be deleted"}`, http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.deleted = append(p.deleted, r.PathValue("name"))
		p.mu.Unlock()
		w.Write([]byte("{}"))
	})
	mux.HandleFunc("GET /v1/node/pool/{name}/nodes", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.NodeListStub{}
		if r.PathValue("name") == "gpu" {
			out = append(out, &api.NodeListStub{ID: "ef567890-1111-2222-3333-444455556666", Datacenter: "dc1", Name: "gpu-host-1",
				NodePool: "gpu", NodeClass: "a100", Status: "ready"})
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /v1/node/pool/{name}/jobs", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.JobListStub{}
		if r.PathValue("name") == "gpu" {
			out = append(out, &api.JobListStub{ID: "train", Namespace: "default", Type: "batch", Priority: 50, NodePool: "gpu", Status: "running"})
		}
		json.NewEncoder(w).Encode(out)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestNodePoolCommandsGolden(t *testing.T) {
	ts := (&poolAPI{}).serve(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"node_pool_list.golden", []string{"node", "pool", "list"}},
		{"node_pool_info.golden", []string{"node", "pool", "info", "gpu"}},
		{"node_pool_nodes.golden", []string{"node", "pool", "nodes", "gpu"}},
		{"node_pool_jobs.golden", []string{"node", "pool", "jobs", "gpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, ts.URL, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			golden(t, tc.name, r.out)
		})
	}
}

func TestNodePoolCommands(t *testing.T) {
	p := &poolAPI{}
	ts := p.serve(t)
	if r := runCmd(t, ts.URL, "node", "pool", "list", "-prefix", "de"); r.code != 0 || !strings.Contains(r.out, "default") || strings.Contains(r.out, "gpu") {
		t.Fatalf("list -prefix: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "list", "-json"); r.code != 0 || !strings.Contains(r.out, `"Provider": "docker"`) {
		t.Fatalf("list -json: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "info", "nope"); r.code != 1 || !strings.Contains(r.err, "Error reading node pool") {
		t.Fatalf("info unknown: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "nodes", "default"); r.code != 0 || !strings.Contains(r.out, `No nodes in node pool "default"`) {
		t.Fatalf("nodes of default: %d %s%s", r.code, r.out, r.err)
	}
	file := filepath.Join(t.TempDir(), "pool.hcl")
	spec := "node_pool \"gpu\" {\n  description = \"d\"\n  scaling {\n    provider = \"exec\"\n    max = 2\n    config { command = \"/usr/local/bin/mk\" }\n    shape { gpu_count = 2 }\n  }\n}\n"
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "apply", file); r.code != 0 || !strings.Contains(r.out, `Successfully applied node pool "gpu"!`) {
		t.Fatalf("apply: %d %s%s", r.code, r.out, r.err)
	}
	if len(p.written) != 1 || p.written[0].Scaling == nil || p.written[0].Scaling.ProviderConfig["command"] != "/usr/local/bin/mk" || p.written[0].Scaling.Shape.GPUCount != 2 {
		t.Fatalf("written = %+v", p.written)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(bad, []byte("node_pool \"gpu\" {\n  scaling {\n    max = \"many\"\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "apply", bad); r.code != 1 || !strings.Contains(r.err, "bad.hcl:3:11") {
		t.Fatalf("apply bad file: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "apply", filepath.Join(t.TempDir(), "missing.hcl")); r.code != 1 || !strings.Contains(r.err, "missing.hcl") {
		t.Fatalf("apply missing file: %d %s", r.code, r.err)
	}
	if len(p.written) != 1 {
		t.Fatalf("a bad file was written: %+v", p.written)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "delete", "gpu"); r.code != 0 || len(p.deleted) != 1 || p.deleted[0] != "gpu" {
		t.Fatalf("delete: %d %s%s %v", r.code, r.out, r.err, p.deleted)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "delete", "default"); r.code != 1 || !strings.Contains(r.err, "built-in") {
		t.Fatalf("delete default: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "node", "pool", "info"); r.code != 1 || !strings.Contains(r.err, "the node pool name") {
		t.Fatalf("info without a name: %d %s", r.code, r.err)
	}
}
