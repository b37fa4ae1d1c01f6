package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/provision/docker"
	"github.com/gpulayer/gpulayer/structs"
)

var (
	binOnce sync.Once
	binPath string
	binErr  string
)

// staticBinary builds the gpulayer binary with CGO_ENABLED=0 once per test
// binary (the image is FROM scratch).
func staticBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		dir, err := os.MkdirTemp("", "gpulayer-provider-bin")
		if err != nil {
			binErr = err.Error()
			return
		}
		binPath = filepath.Join(dir, "gpulayer")
		build := exec.Command("go", "build", "-o", binPath, ".")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Sprintf("static build: %v\n%s", err, out)
		}
	})
	if binErr != "" {
		t.Fatal(binErr)
	}
	return binPath
}

// server is an in-process server-only agent on 127.0.0.1 with ACLs on,
// bootstrapped: the containers (host network) reach it there.
type server struct {
	url   string
	addr  string
	token string
}

func startServer(t *testing.T) *server { return startServerACL(t, true) }

// startServerACL starts the server with ACLs on (bootstrapped) or off.
func startServerACL(t *testing.T, acl bool) *server {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.ACL = &agent.ACLConfig{Enabled: &acl}
	cfg.Name = "provider-test-server"
	cfg.Server.Enabled = true
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = porttest.Take(t), porttest.Take(t), porttest.Take(t)
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Name: cfg.Name, Level: hclog.Warn, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	s := &server{url: "http://" + a.HTTPAddr(), addr: a.HTTPAddr()}
	if !acl {
		return s
	}
	var tok api.ACLToken
	waittest.NoErr(t, 30*time.Second, "ACL bootstrap", func() (bool, error) {
		err := s.do(http.MethodPut, "/v1/acl/bootstrap", &tok)
		return err == nil && tok.SecretID != "", err
	})
	s.token = tok.SecretID
	return s
}

func (s *server) do(method, path string, out any) error {
	return s.send(method, path, nil, out)
}

// send makes one API request with body as JSON (none when nil) and
// decodes the answer into out (when not nil).
func (s *server) send(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return err
	}
	if s.token != "" {
		req.Header.Set("X-Nomad-Token", s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// containerLogs returns the tail of a container's logs, for failure
// messages.
func containerLogs(id string) string {
	out, _ := exec.Command("docker", "logs", "--tail", "30", id).CombinedOutput()
	return string(out)
}

// TestDockerProvider runs the provider against the local engine and a
// real in-process server: hosts are created (the image built FROM
// scratch from the static binary), a create repeated with the same key —
// twice at once — returns the same container, a create interrupted before
// the start is finished by the next, List finds exactly the three,
// each container's agent registers as a ready node with the shape's
// simulated GPUs using the join token, and Terminate removes each (a
// second Terminate of a gone host is nil), leaving no container.
func TestDockerProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs containers (skipped under -short)")
	}
	dockertest.Require(t)
	bin := staticBinary(t)
	srv := startServer(t)
	pool := fmt.Sprintf("ptest-%d-%d", os.Getpid(), rand.IntN(1e6))
	ports := []string{}
	for range 4 {
		ports = append(ports, fmt.Sprint(porttest.Take(t)))
	}
	p, err := docker.New(docker.Config{Binary: bin, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: testWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test left, by label.
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelPool+"="+pool).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
		_ = p.Close()
	})
	pc := map[string]string{docker.KeyHTTPPorts: strings.Join(ports, ","), docker.KeyMemoryMB: "256", docker.KeyPids: "256", docker.KeyLogLevel: "debug"}
	req := func(key, name string) provision.CreateRequest {
		return provision.CreateRequest{
			Pool: pool, IdempotencyKey: key, NodeName: name, Config: pc,
			Shape: structs.NodeShape{NodeClass: "sim-a100", GPUModel: "NVIDIA A100-SXM4-80GB", GPUCount: 1, GPUMemoryMB: 81920},
			Join:  provision.JoinInfo{Servers: []string{srv.addr}, Token: srv.token, Region: "global", Datacenter: "dc1"},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	h1, err := p.Create(ctx, req("key-1", pool+"-n1"))
	if err != nil {
		t.Fatal(err)
	}
	// The same key twice at once: one container, both calls answer it.
	var wg sync.WaitGroup
	twice := make([]provision.Host, 2)
	errs := make([]error, 2)
	for i := range twice {
		wg.Add(1)
		go func() {
			defer wg.Done()
			twice[i], errs[i] = p.Create(ctx, req("key-2", pool+"-n2"))
		}()
	}
	wg.Wait()
	for i := range twice {
		if errs[i] != nil {
			t.Fatalf("concurrent create %d: %v", i, errs[i])
		}
	}
	h2 := twice[0]
	if twice[1].ID != h2.ID || h2.ID == h1.ID {
		t.Fatalf("concurrent creates with one key: %s and %s (first host %s)", twice[0].ID, twice[1].ID, h1.ID)
	}
	// A call interrupted between creating the container and starting it
	// (a leader that died): the next Create with the key finishes it.
	id3, err := p.CreateOnly(ctx, req("key-3", pool+"-n3"))
	if err != nil {
		t.Fatal(err)
	}
	h3, err := p.Create(ctx, req("key-3", pool+"-n3"))
	if err != nil || h3.ID != id3 || h3.State != "running" {
		t.Fatalf("create after an interrupted one: %+v, %v; want %s running", h3, err, id3)
	}
	again, err := p.Create(ctx, req("key-1", pool+"-n1"))
	if err != nil || again.ID != h1.ID {
		t.Fatalf("repeated create: %+v, %v; want %s", again, err, h1.ID)
	}
	if h1.Pool != pool || h1.IdempotencyKey != "key-1" || h1.NodeName != pool+"-n1" || h1.State != "running" {
		t.Errorf("host: %+v", h1)
	}

	hosts, err := p.List(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 3 || hosts[0].ID != h1.ID || hosts[1].ID != h2.ID || hosts[2].ID != h3.ID {
		t.Fatalf("list: %+v", hosts)
	}
	if other, err := p.List(ctx, pool+"-other"); err != nil || len(other) != 0 {
		t.Fatalf("list of another pool: %+v, %v", other, err)
	}

	// The join proof: the three agents register with the server as ready
	// nodes of the shape's class, with one simulated GPU each.
	names := map[string]string{pool + "-n1": h1.ID, pool + "-n2": h2.ID, pool + "-n3": h3.ID}
	var nodes []*api.Node
	waittest.For(t, 90*time.Second, "the container agents registered as ready nodes", func() (bool, string) {
		nodes = nil
		if err := srv.do(http.MethodGet, "/v1/nodes", &nodes); err != nil {
			return false, err.Error()
		}
		ready := 0
		var seen []string
		for _, n := range nodes {
			seen = append(seen, n.Name+"="+n.Status)
			if _, ok := names[n.Name]; ok && n.Status == structs.NodeStatusReady {
				ready++
			}
		}
		if ready == len(names) {
			return true, ""
		}
		var logs []string
		for _, id := range names {
			logs = append(logs, containerLogs(id))
		}
		return false, fmt.Sprintf("nodes %v; container logs:\n%s", seen, strings.Join(logs, "\n---\n"))
	})
	for _, stub := range nodes {
		var n api.Node
		if err := srv.do(http.MethodGet, "/v1/node/"+stub.ID, &n); err != nil {
			t.Fatal(err)
		}
		gpus := 0
		if n.NodeResources != nil {
			for _, g := range n.NodeResources.Devices {
				if g.Type == "gpu" && g.Name == "NVIDIA A100-SXM4-80GB" {
					gpus += len(g.Instances)
				}
			}
		}
		if n.NodeClass != "sim-a100" || n.NodePool != pool || gpus != 1 || !strings.HasPrefix(n.HTTPAddr, "127.0.0.1:") {
			t.Errorf("node %s: class %q, pool %q, %d simulated GPUs, http %s", n.Name, n.NodeClass, n.NodePool, gpus, n.HTTPAddr)
		}
	}

	runJobAndReadLogs(t, srv, pool)

	for _, h := range []provision.Host{h1, h2, h3} {
		if err := p.Terminate(ctx, pool, h.ID); err != nil {
			t.Fatalf("terminate %s: %v", h.ID, err)
		}
		if err := p.Terminate(ctx, pool, h.ID); err != nil {
			t.Fatalf("second terminate of %s: %v", h.ID, err)
		}
	}
	hosts, err = p.List(ctx, pool)
	if err != nil || len(hosts) != 0 {
		t.Fatalf("list after terminate: %+v, %v", hosts, err)
	}
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelPool+"="+pool).Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("docker ps after terminate: %q, %v", out, err)
	}
}

// TestDockerTerminateRefusesForeign: Terminate never removes a container
// the provider did not make, nor one of another pool.
func TestDockerTerminateRefusesForeign(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a container (skipped under -short)")
	}
	image := dockertest.BuildImage(t)
	name := fmt.Sprintf("gpulayer-foreign-%d-%d", os.Getpid(), rand.IntN(1e6))
	out, err := exec.Command("docker", "create", "--name", name, "--label", docker.LabelPool+"=gpu", image, "sleep", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("docker create: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	p, err := docker.New(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Terminate(ctx, "gpu", name); err == nil || !strings.Contains(err.Error(), "not one the provider made") {
		t.Fatalf("terminate of a foreign container: %v", err)
	}
	if err := p.Terminate(ctx, "gpu", "no-such-container-"+name); err != nil {
		t.Fatalf("terminate of a missing container: %v", err)
	}
	if hosts, err := p.List(ctx, "gpu"); err != nil {
		t.Fatal(err)
	} else {
		for _, h := range hosts {
			if strings.Contains(h.ID, strings.TrimSpace(string(out))) {
				t.Fatalf("list returned the foreign container: %+v", hosts)
			}
		}
	}
	ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "name="+name).Output()
	if strings.TrimSpace(string(ids)) == "" {
		t.Fatal("the foreign container was removed")
	}
}

// testWriter sends the provider's log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestDockerImageAndDeadline: a pool naming an image the engine lacks is
// refused (nothing is pulled), and a call whose ctx is done returns its
// error without making anything.
func TestDockerImageAndDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("talks to the engine (skipped under -short)")
	}
	dockertest.Require(t)
	p, err := docker.New(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool := fmt.Sprintf("ptest-img-%d-%d", os.Getpid(), rand.IntN(1e6))
	r := provision.CreateRequest{Pool: pool, IdempotencyKey: "k", NodeName: pool + "-n", Join: provision.JoinInfo{Servers: []string{"127.0.0.1:1"}},
		Config: map[string]string{docker.KeyImage: "gpulayer-no-such-image:never"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Create(ctx, r); !errors.Is(err, docker.ErrConfig) || !strings.Contains(err.Error(), "never pulls") {
		t.Fatalf("missing image: %v", err)
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	r.Config = nil
	if _, err := p.Create(done, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a done ctx: %v", err)
	}
	if _, err := p.List(done, pool); !errors.Is(err, context.Canceled) {
		t.Fatalf("list with a done ctx: %v", err)
	}
	if err := p.Terminate(done, pool, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("terminate with a done ctx: %v", err)
	}
	if hosts, err := p.List(ctx, pool); err != nil || len(hosts) != 0 {
		t.Fatalf("hosts made: %+v, %v", hosts, err)
	}
}

// TestCreateRefusesBadRequests: requests whose fields would become bad
// labels or agent settings are refused before the engine is asked.
func TestCreateRefusesBadRequests(t *testing.T) {
	p, err := docker.New(docker.Config{Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	good := provision.CreateRequest{Pool: "gpu", IdempotencyKey: "k", NodeName: "n", Join: provision.JoinInfo{Servers: []string{"127.0.0.1:4656"}}}
	for _, tc := range []struct {
		name string
		mod  func(*provision.CreateRequest)
		want string
	}{
		{"pool all", func(r *provision.CreateRequest) { r.Pool = "all" }, "pool"},
		{"pool chars", func(r *provision.CreateRequest) { r.Pool = "a/b" }, "pool"},
		{"no key", func(r *provision.CreateRequest) { r.IdempotencyKey = "" }, "idempotency key"},
		{"key control", func(r *provision.CreateRequest) { r.IdempotencyKey = "a\nb" }, "control characters"},
		{"long name", func(r *provision.CreateRequest) { r.NodeName = strings.Repeat("n", 129) }, "node name"},
		{"gpus", func(r *provision.CreateRequest) { r.Shape.GPUCount = 65 }, "gpu count"},
		{"memory model", func(r *provision.CreateRequest) { r.Shape.MemoryModel = "shared" }, "memory model"},
		{"availability", func(r *provision.CreateRequest) { r.Shape.Availability = "spot" }, "availability"},
		{"no servers", func(r *provision.CreateRequest) { r.Join.Servers = nil }, "join servers"},
		{"bad config", func(r *provision.CreateRequest) { r.Config = map[string]string{"memory": "1"} }, `unknown key "memory"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.mod(&r)
			if _, err := p.Create(context.Background(), r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestDockerDynamicBinary: a default (cgo, dynamically linked) build of
// gpulayer runs too: the image gets its interpreter and libraries, and the
// container's agent registers with the server.
func TestDockerDynamicBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpulayer and an image and runs a container (skipped under -short)")
	}
	dockertest.Require(t)
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "gpulayer")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("no cgo build here: %v\n%s", err, out)
	}
	libs, err := docker.Libraries(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		t.Skip("the default build is static here")
	}
	srv := startServer(t)
	pool := fmt.Sprintf("ptest-dyn-%d-%d", os.Getpid(), rand.IntN(1e6))
	p, err := docker.New(docker.Config{Binary: bin, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: testWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelPool+"="+pool).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
		_ = p.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := p.Create(ctx, provision.CreateRequest{
		Pool: pool, IdempotencyKey: "k", NodeName: pool + "-n",
		Config: map[string]string{docker.KeyHTTPPorts: fmt.Sprint(porttest.Take(t)), docker.KeyMemoryMB: "256"},
		Shape:  structs.NodeShape{GPUCount: 1},
		Join:   provision.JoinInfo{Servers: []string{srv.addr}, Token: srv.token},
	})
	if err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 90*time.Second, "the agent of the dynamically linked binary registered", func() (bool, string) {
		var nodes []*api.Node
		if err := srv.do(http.MethodGet, "/v1/nodes", &nodes); err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.Name == h.NodeName && n.Status == structs.NodeStatusReady {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d nodes; container logs:\n%s", len(nodes), containerLogs(h.ID))
	})
	if err := p.Terminate(ctx, pool, h.ID); err != nil {
		t.Fatal(err)
	}
}

// runJobAndReadLogs runs a one-GPU batch job in pool (native driver, the
// image's own binary) and reads its stdout through the server, which
// proxies to the container agent's HTTP port: both directions of the
// host networking.
func runJobAndReadLogs(t *testing.T, srv *server, pool string) {
	t.Helper()
	job := map[string]any{
		"ID": pool + "-job", "Type": "batch", "NodePool": pool,
		"TaskGroups": []any{map[string]any{
			"Name": "g", "Count": 1,
			"Tasks": []any{map[string]any{
				"Name": "t", "Driver": "native",
				"Config":    map[string]any{"command": docker.AgentPath, "args": []string{"version"}},
				"Resources": map[string]any{"CPU": 100, "MemoryMB": 32, "Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": 1}}},
			}},
		}},
	}
	if err := srv.send(http.MethodPut, "/v1/jobs", map[string]any{"Job": job}, nil); err != nil {
		t.Fatal(err)
	}
	var done *api.Allocation
	waittest.For(t, 60*time.Second, "the job's allocation complete on a container node", func() (bool, string) {
		var allocs []*api.Allocation
		if err := srv.do(http.MethodGet, "/v1/job/"+pool+"-job/allocations", &allocs); err != nil {
			return false, err.Error()
		}
		var states []string
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusComplete {
				done = a
				return true, ""
			}
			if a.ClientStatus == structs.AllocClientStatusFailed {
				b, _ := json.Marshal(a.TaskStates)
				t.Fatalf("allocation failed: %s", b)
			}
			states = append(states, a.ClientStatus)
		}
		return false, fmt.Sprintf("allocations %v", states)
	})
	logReq, err := http.NewRequest(http.MethodGet, srv.url+"/v1/client/fs/logs/"+done.ID+"?task=t&type=stdout&plain=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.token != "" {
		logReq.Header.Set("X-Nomad-Token", srv.token)
	}
	resp, err := http.DefaultClient.Do(logReq)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	t.Logf("allocation %s on node %s; its stdout through the server: %q", done.ID, done.NodeID, logs)
	if resp.StatusCode != http.StatusOK || len(bytes.TrimSpace(logs)) == 0 {
		t.Errorf("task logs through the server: %d %q", resp.StatusCode, logs)
	}

}

// TestDockerJoinWithoutACL: against a cluster with ACLs off the join has
// no token; the container agent joins, runs a job, and the server reads
// its logs.
func TestDockerJoinWithoutACL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs a container (skipped under -short)")
	}
	dockertest.Require(t)
	bin := staticBinary(t)
	srv := startServerACL(t, false)
	pool := fmt.Sprintf("ptest-noacl-%d-%d", os.Getpid(), rand.IntN(1e6))
	p, err := docker.New(docker.Config{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelPool+"="+pool).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
		_ = p.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := p.Create(ctx, provision.CreateRequest{
		Pool: pool, IdempotencyKey: "k", NodeName: pool + "-n",
		Config: map[string]string{docker.KeyHTTPPorts: fmt.Sprint(porttest.Take(t)), docker.KeyMemoryMB: "256"},
		Shape:  structs.NodeShape{GPUCount: 1},
		Join:   provision.JoinInfo{Servers: []string{srv.addr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 90*time.Second, "the container agent registered", func() (bool, string) {
		var nodes []*api.Node
		if err := srv.do(http.MethodGet, "/v1/nodes", &nodes); err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.Name == h.NodeName && n.Status == structs.NodeStatusReady {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d nodes; container logs:\n%s", len(nodes), containerLogs(h.ID))
	})
	runJobAndReadLogs(t, srv, pool)
	if err := p.Terminate(ctx, pool, h.ID); err != nil {
		t.Fatal(err)
	}
}

// TestDockerPortsAcrossProviders: two pools' providers (one each, as the
// server builds them) creating at once never give two agents one port.
func TestDockerPortsAcrossProviders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs containers (skipped under -short)")
	}
	dockertest.Require(t)
	bin := staticBinary(t)
	base := fmt.Sprintf("ptest-ports-%d-%d", os.Getpid(), rand.IntN(1e6))
	ports := fmt.Sprintf("%d,%d", porttest.Take(t), porttest.Take(t))
	t.Cleanup(func() {
		for _, pool := range []string{base + "-a", base + "-b"} {
			out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelPool+"="+pool).Output()
			for _, id := range strings.Fields(string(out)) {
				_ = exec.Command("docker", "rm", "-f", id).Run()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	hosts := make([]provision.Host, 2)
	errs := make([]error, 2)
	for i, pool := range []string{base + "-a", base + "-b"} {
		p, err := docker.New(docker.Config{Binary: bin})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			hosts[i], errs[i] = p.Create(ctx, provision.CreateRequest{
				Pool: pool, IdempotencyKey: "k", NodeName: pool + "-n",
				Config: map[string]string{docker.KeyHTTPPorts: ports, docker.KeyMemoryMB: "128"},
				// No server answers here: the agents only have to start.
				Join: provision.JoinInfo{Servers: []string{"127.0.0.1:1"}},
			})
		}()
	}
	wg.Wait()
	got := map[string]bool{}
	for i, h := range hosts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		out, err := exec.Command("docker", "inspect", "--format", "{{index .Config.Labels \""+docker.LabelHTTPPort+"\"}}", h.ID).Output()
		if err != nil {
			t.Fatal(err)
		}
		port := strings.TrimSpace(string(out))
		if got[port] {
			t.Fatalf("two containers on port %s", port)
		}
		got[port] = true
	}
}
