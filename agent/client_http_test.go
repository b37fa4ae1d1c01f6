package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/structs"
)

// startAgent starts an in-process agent from cfg on free loopback ports
// and stops it at the end of the test.
func startAgent(t *testing.T, cfg *agent.Config) *agent.Agent {
	t.Helper()
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = taskUserDir(t)
	cfg.Ports.HTTP = freePort(t)
	cfg.Ports.Raft = freePort(t)
	cfg.Ports.Serf = freePort(t)
	cfg.LogLevel = "WARN"
	if cfg.ACL == nil {
		// These tests check the node routes and proxying, not tokens
		// (acl_e2e_test.go does): ACLs off unless the test set them.
		off := false
		cfg.ACL = &agent.ACLConfig{Enabled: &off}
	}
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Name: cfg.Name, Level: hclog.Warn, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(); err != nil {
			t.Errorf("shutdown %s: %v", cfg.Name, err)
		}
	})
	return a
}

// TestClientOnlyAgentOverHTTP runs a server-only agent and a client-only
// agent that reaches it through the HTTP node routes (-servers): the node
// registers with its simulated GPUs, a GPU job runs on it, its logs are
// read through the server (proxied to the client agent), and another
// process cannot take the node over without its secret.
func TestClientOnlyAgentOverHTTP(t *testing.T) {
	scfg := agent.DefaultConfig()
	scfg.Name = "srv1"
	scfg.Server.Enabled = true
	srv := startAgent(t, scfg)
	srvURL := "http://" + srv.HTTPAddr()

	ccfg := agent.DefaultConfig()
	ccfg.Name = "gpu-host-1"
	ccfg.Client.Enabled = true
	// A dead server first: the client must move on to the live one.
	ccfg.Client.Servers = []string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), srv.HTTPAddr()}
	two := 2
	ccfg.Client.DevGPUs = &two
	cl := startAgent(t, ccfg)

	var nodes []*api.Node
	waittest.For(t, 20*time.Second, "the client node registered", func() (bool, string) {
		nodes = nil
		if err := getJSON(srvURL+"/v1/nodes", &nodes); err != nil {
			return false, err.Error()
		}
		return len(nodes) == 1 && nodes[0].Status == structs.NodeStatusReady, fmt.Sprintf("%d nodes", len(nodes))
	})
	var node api.Node
	if err := getJSON(srvURL+"/v1/node/"+nodes[0].ID, &node); err != nil {
		t.Fatal(err)
	}
	if node.Name != "gpu-host-1" || len(node.NodeResources.Devices) != 1 || len(node.NodeResources.Devices[0].Instances) != 2 {
		t.Fatalf("node %s has devices %+v, want 2 simulated GPUs", node.Name, node.NodeResources.Devices)
	}

	job := map[string]interface{}{
		"ID": "over-http", "Type": "batch",
		"TaskGroups": []interface{}{map[string]interface{}{
			"Name": "g", "Count": 1,
			"Tasks": []interface{}{map[string]interface{}{
				"Name": "t", "Driver": "native",
				"Config":    map[string]interface{}{"command": "/bin/sh", "args": []string{"-c", "echo gpus=$CUDA_VISIBLE_DEVICES"}},
				"Resources": map[string]interface{}{"CPU": 100, "MemoryMB": 32, "Devices": []interface{}{map[string]interface{}{"Name": "nvidia/gpu", "Count": 1}}},
			}},
		}},
	}
	if code, body := putJSON(t, srvURL+"/v1/jobs", map[string]interface{}{"Job": job}, ""); code != 200 {
		t.Fatalf("PUT /v1/jobs: %d %s", code, body)
	}
	var alloc *api.Allocation
	waittest.For(t, 30*time.Second, "the allocation complete", func() (bool, string) {
		var allocs []*api.Allocation
		if err := getJSON(srvURL+"/v1/job/over-http/allocations", &allocs); err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusComplete {
				alloc = a
				return true, ""
			}
			if a.ClientStatus == structs.AllocClientStatusFailed {
				t.Fatalf("allocation failed: %+v", a.TaskStates)
			}
		}
		return false, fmt.Sprintf("%d allocs", len(allocs))
	})
	if alloc.NodeID != node.ID {
		t.Fatalf("allocation on node %s, want %s", alloc.NodeID, node.ID)
	}

	// Logs through the server: proxied to the client agent's HTTP API.
	resp, err := http.Get(srvURL + "/v1/client/fs/logs/" + alloc.ID + "?task=t&type=stdout&plain=true")
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(logs), "gpus=GPU-sim-") {
		t.Errorf("logs through the server: %d %q", resp.StatusCode, logs)
	}
	// The client-only agent serves its own health, and no cluster routes.
	if err := getJSON("http://"+cl.HTTPAddr()+"/v1/status/health", &map[string]interface{}{}); err != nil {
		t.Errorf("client-only health: %v", err)
	}
	if err := getJSON("http://"+cl.HTTPAddr()+"/v1/jobs", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("client-only agent served /v1/jobs: %v", err)
	}

	// Another process claiming the node ID without the secret is refused.
	code, body := putJSON(t, srvURL+"/v1/node/register", map[string]interface{}{
		"Node": map[string]interface{}{"ID": node.ID, "Name": "impostor"}, "SecretID": "guess"}, "")
	if code != http.StatusForbidden {
		t.Errorf("register with a wrong secret: %d %s", code, body)
	}
	code, body = putJSON(t, srvURL+"/v1/node/"+node.ID+"/heartbeat", map[string]string{"Status": "down"}, "guess")
	if code != http.StatusForbidden {
		t.Errorf("heartbeat with a wrong secret: %d %s", code, body)
	}
	if err := getJSON(srvURL+"/v1/node/"+node.ID, &node); err != nil || node.Name != "gpu-host-1" || node.Status != structs.NodeStatusReady {
		t.Errorf("node after refused requests: %+v %v", node, err)
	}
}

func getJSON(url string, out interface{}) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

func putJSON(t testing.TB, url string, v interface{}, secret string) (int, string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set(structs.HeaderNodeSecret, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
