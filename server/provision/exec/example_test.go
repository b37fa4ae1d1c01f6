package exec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server/provision"
	provexec "github.com/gpulayer/gpulayer/server/provision/exec"
	"github.com/gpulayer/gpulayer/structs"
)

// TestLocalAgentExample runs the example provider
// examples/provision/local-agent.sh (its hosts are local client agent
// processes) through the exec provider against a real in-process server
// with ACLs on: two hosts join the pool as ready nodes with the shape's
// simulated GPUs using the join token, a repeated create returns the same
// host, list finds both, terminate (twice) stops the agent process and
// list ends empty.
func TestLocalAgentExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpulayer and runs agents (skipped under -short)")
	}
	for _, tool := range []string{"jq", "setsid", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: the example provider needs %s: %v", tool, err)
		}
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	script, err := filepath.Abs(filepath.Join(root, "examples", "provision", "local-agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "gpulayer")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	cfg := agent.DefaultConfig()
	cfg.Name = "example-provider-server"
	cfg.Server.Enabled = true
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = porttest.Take(t), porttest.Take(t), porttest.Take(t)
	srv, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	url := "http://" + srv.HTTPAddr()
	get := func(method, path, token string, out any) error {
		req, err := http.NewRequest(method, url+path, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("X-Nomad-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return json.Unmarshal(b, out)
	}
	var tok api.ACLToken
	waittest.NoErr(t, 30*time.Second, "ACL bootstrap", func() (bool, error) {
		err := get(http.MethodPut, "/v1/acl/bootstrap", "", &tok)
		return err == nil && tok.SecretID != "", err
	})

	state := t.TempDir()
	p, err := provexec.FromPoolConfig(map[string]string{
		provexec.KeyCommand: script, provexec.KeyTimeout: "30s",
		"gpulayer": bin, "state_dir": state, "http_ports": strconv.Itoa(porttest.Take(t)),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		hosts, _ := p.List(context.Background(), "")
		for _, h := range hosts {
			_ = p.Terminate(context.Background(), h.Pool, h.ID)
		}
	})
	req := func(key, name string) provision.CreateRequest {
		return provision.CreateRequest{
			Pool: "gpu", IdempotencyKey: key, NodeName: name,
			Shape: structs.NodeShape{NodeClass: "local-a100", GPUModel: "NVIDIA A100-SXM4-80GB", GPUCount: 2, GPUMemoryMB: 81920},
			Join:  provision.JoinInfo{Servers: []string{srv.HTTPAddr()}, Token: tok.SecretID, Region: "global", Datacenter: "dc1"},
		}
	}
	h1, err := p.Create(ctx, req("k1", "local-1"))
	if err != nil {
		t.Fatal(err)
	}
	h2, err := p.Create(ctx, req("k2", "local-2"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Create(ctx, req("k1", "local-1"))
	if err != nil || again.ID != h1.ID || h1.ID == h2.ID {
		t.Fatalf("hosts %+v %+v, repeated %+v, %v", h1, h2, again, err)
	}
	hosts, err := p.List(ctx, "gpu")
	if err != nil || len(hosts) != 2 {
		t.Fatalf("list: %+v, %v", hosts, err)
	}

	waittest.For(t, 60*time.Second, "both local agents registered in pool gpu", func() (bool, string) {
		var nodes []*api.Node
		if err := get(http.MethodGet, "/v1/nodes", tok.SecretID, &nodes); err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, stub := range nodes {
			var n api.Node
			if err := get(http.MethodGet, "/v1/node/"+stub.ID, tok.SecretID, &n); err != nil {
				return false, err.Error()
			}
			gpus := 0
			if n.NodeResources != nil {
				for _, g := range n.NodeResources.Devices {
					gpus += len(g.Instances)
				}
			}
			if n.Status == structs.NodeStatusReady && n.NodePool == "gpu" && n.NodeClass == "local-a100" && gpus == 2 {
				ready++
			}
		}
		logs, _ := os.ReadFile(filepath.Join(state, h1.ID, "agent.log"))
		return ready == 2, fmt.Sprintf("%d nodes, %d ready as asked; first agent's log:\n%s", len(nodes), ready, logs)
	})

	pidb, err := os.ReadFile(filepath.Join(state, h1.ID, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []provision.Host{h1, h2} {
		for range 2 {
			if err := p.Terminate(ctx, "gpu", h.ID); err != nil {
				t.Fatalf("terminate %s: %v", h.ID, err)
			}
		}
	}
	waittest.Until(t, 20*time.Second, "the first agent process gone", func() bool {
		return syscall.Kill(pid, 0) != nil
	})
	if hosts, err := p.List(ctx, "gpu"); err != nil || len(hosts) != 0 {
		t.Fatalf("list after terminate: %+v, %v", hosts, err)
	}
}
