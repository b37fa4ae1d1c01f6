package agent_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	provdocker "github.com/gpulayer/gpulayer/server/provision/docker"
)

var (
	staticOnce sync.Once
	staticPath string
	staticErr  error
)

// staticGpulayer builds the binary with CGO_ENABLED=0 once per test
// process: the docker provider's image is FROM scratch.
func staticGpulayer(t testing.TB) string {
	t.Helper()
	skipChildProcessesUnderRace(t)
	staticOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpulayer-static-bin")
		if err != nil {
			staticErr = err
			return
		}
		staticPath = filepath.Join(dir, "gpulayer")
		cmd := exec.Command("go", "build", "-o", staticPath, ".")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			staticErr = fmt.Errorf("static build: %v\n%s", err, out)
		}
	})
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	return staticPath
}

// poolContainers lists the containers (any state) of pool by label.
func poolContainers(t testing.TB, pool string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+provdocker.LabelManaged, "--filter", "label="+provdocker.LabelPool+"="+pool).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

func removePoolContainers(t testing.TB, pool string) {
	for _, id := range poolContainers(t, pool) {
		_ = exec.Command("docker", "rm", "-f", id).Run()
	}
}

// provisionServers starts n real server processes (ACLs off, so the
// provisioned clients join without a token) with gossip between them and
// returns the cluster once it is stable.
func provisionServers(t *testing.T, n int, bin string) *testCluster {
	t.Helper()
	root := t.TempDir()
	c := &testCluster{t: t}
	c.http = &http.Client{Timeout: 10 * time.Second}
	type ports struct{ http, raft, serf int }
	sp := make([]ports, n)
	for i := range sp {
		sp[i] = ports{freePort(t), freePort(t), freePort(t)}
	}
	for i := range sp {
		cfgPath := filepath.Join(root, fmt.Sprintf("server%d.hcl", i))
		// The pools name the static binary; the servers' own config must
		// allow it (an API caller cannot pick a binary the servers run).
		hcl := "server {\n  encrypt = \"" + clusterGossipKey + "\"\n  provision_docker_binaries = [\"" + bin + "\"]\n}\nacl {\n  enabled = false\n}\n"
		if err := os.WriteFile(cfgPath, []byte(hcl), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"agent", "-server", fmt.Sprintf("-bootstrap-expect=%d", n),
			"-data-dir=" + filepath.Join(root, fmt.Sprintf("server%d", i)), "-bind=127.0.0.1",
			fmt.Sprintf("-http-port=%d", sp[i].http), fmt.Sprintf("-raft-port=%d", sp[i].raft),
			fmt.Sprintf("-serf-port=%d", sp[i].serf), fmt.Sprintf("-node=server%d", i), "-log-level=DEBUG", "-config=" + cfgPath}
		for j := range sp {
			if j != i {
				args = append(args, fmt.Sprintf("-retry-join=127.0.0.1:%d", sp[j].serf))
			}
		}
		c.servers = append(c.servers, &proc{t: t, name: fmt.Sprintf("server%d", i), bin: bin, args: args,
			httpAddr: fmt.Sprintf("127.0.0.1:%d", sp[i].http), raftAddr: fmt.Sprintf("127.0.0.1:%d", sp[i].raft)})
	}
	t.Cleanup(c.stopAll)
	for _, p := range c.servers {
		p.start()
	}
	c.waitStable(90 * time.Second)
	return c
}

// dockerPoolBody is a node pool of the docker provider: min..max hosts of
// one simulated GPU, idle after idleAfter.
func dockerPoolBody(t *testing.T, name, bin string, min, max int, idleAfter time.Duration) map[string]any {
	ports := make([]string, 0, max+2)
	for i := 0; i < max+2; i++ {
		ports = append(ports, fmt.Sprint(freePort(t)))
	}
	return map[string]any{"NodePools": []any{map[string]any{
		"Name": name,
		"Scaling": map[string]any{
			"Provider": "docker", "Min": min, "Max": max,
			"ProviderConfig": map[string]string{provdocker.KeyBinary: bin, provdocker.KeyHTTPPorts: strings.Join(ports, ","),
				provdocker.KeyMemoryMB: "256", provdocker.KeyPids: "256"},
			"Shape":     map[string]any{"GPUCount": 1, "GPUModel": "NVIDIA A100-SXM4-80GB", "GPUMemoryMB": 81920},
			"IdleAfter": int64(idleAfter), "Idle": map[string]any{"NoAllocations": true},
		},
	}}}
}

func poolStatus(c *testCluster, p *proc, pool string) (*api.NodePoolStatus, string) {
	var st api.NodePoolStatus
	code, body := c.send(p, http.MethodGet, "/v1/node/pool/"+pool+"/status", nil, &st)
	if code != http.StatusOK {
		return nil, fmt.Sprintf("%d %s", code, body)
	}
	return &st, ""
}

// TestProvisionDockerScaleFromZero (Must show 1): with the docker
// provider and an empty pool (min 0), 4 one-GPU batch jobs queue, 4
// containers start and join as nodes, the jobs run on them, the nodes
// fall idle and are drained and terminated after idle_after: docker ps
// (by the pool's label) ends empty.
func TestProvisionDockerScaleFromZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs containers (skipped under -short)")
	}
	dockertest.Require(t)
	bin := staticGpulayer(t)
	pool := fmt.Sprintf("e2e-zero-%d", rand.IntN(1e6))
	t.Cleanup(func() { removePoolContainers(t, pool) })
	c := provisionServers(t, 1, bin)
	srv := c.servers[0]
	if code, body := c.send(srv, http.MethodPut, "/v1/node/pools", dockerPoolBody(t, pool, bin, 0, 4, 5*time.Second), nil); code != http.StatusOK {
		t.Fatalf("apply pool: %d %s", code, body)
	}
	var jobs []string
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("%s-job%d", pool, i)
		job := map[string]any{"ID": id, "Type": "batch", "NodePool": pool,
			"TaskGroups": []any{map[string]any{"Name": "g", "Count": 1,
				"Tasks": []any{map[string]any{"Name": "t", "Driver": "native",
					"Config":    map[string]any{"command": provdocker.AgentPath, "args": []string{"version"}},
					"Resources": map[string]any{"CPU": 100, "MemoryMB": 32, "Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": 1}}}}}}}}
		if code, body := c.send(srv, http.MethodPut, "/v1/jobs", map[string]any{"Job": job}, nil); code != http.StatusOK {
			t.Fatalf("register %s: %d %s", id, code, body)
		}
		jobs = append(jobs, id)
	}
	maxContainers := 0
	var lastStatus *api.NodePoolStatus
	waittest.For(t, 4*time.Minute, "4 jobs complete on provisioned nodes", func() (bool, string) {
		maxContainers = max(maxContainers, len(poolContainers(t, pool)))
		complete := 0
		var states []string
		for _, id := range jobs {
			var allocs []*api.Allocation
			if code, body := c.send(srv, http.MethodGet, "/v1/job/"+id+"/allocations", nil, &allocs); code != http.StatusOK {
				return false, body
			}
			for _, a := range allocs {
				states = append(states, id+"="+a.ClientStatus+"@"+a.NodeName)
				if a.ClientStatus == "complete" {
					complete++
				}
			}
		}
		st, _ := poolStatus(c, srv, pool)
		if st != nil {
			lastStatus = st
		}
		b, _ := json.Marshal(lastStatus)
		return complete == 4, fmt.Sprintf("allocs %v; containers %d; status %s", states, len(poolContainers(t, pool)), b)
	})
	if lastStatus != nil {
		for _, d := range lastStatus.Decisions {
			t.Logf("decision: %s x%d: %s", d.Op, d.Count, d.Reason)
		}
	}
	t.Logf("containers at most %d while the jobs ran", maxContainers)
	if maxContainers != 4 {
		t.Errorf("containers at most %d, want 4 (one per one-GPU job)", maxContainers)
	}
	waittest.For(t, 3*time.Minute, "idle hosts terminated: docker ps empty", func() (bool, string) {
		left := poolContainers(t, pool)
		st, _ := poolStatus(c, srv, pool)
		b, _ := json.Marshal(st)
		return len(left) == 0, fmt.Sprintf("%d containers left; status %s", len(left), b)
	})
	// The terminated hosts' nodes are deregistered: `node status` shows
	// none of them, not even down.
	waittest.For(t, time.Minute, "terminated hosts' nodes deregistered", func() (bool, string) {
		var nodes []*api.NodeListStub
		if code, body := c.send(srv, http.MethodGet, "/v1/nodes", nil, &nodes); code != http.StatusOK {
			return false, body
		}
		var left []string
		for _, n := range nodes {
			if n.NodePool == pool {
				left = append(left, n.Name+"="+n.Status)
			}
		}
		return len(left) == 0, fmt.Sprintf("nodes of the pool: %v", left)
	})
	st, msg := poolStatus(c, srv, pool)
	if st == nil {
		t.Fatal(msg)
	}
	terms := 0
	for _, d := range st.Decisions {
		if d.Op == "terminate" {
			terms++
			t.Logf("decision: %s: %s", d.Op, d.Reason)
		}
	}
	out, _ := exec.Command("docker", "ps", "--filter", "label="+provdocker.LabelPool+"="+pool).Output()
	t.Logf("docker ps --filter label=%s=%s:\n%s", provdocker.LabelPool, pool, out)
	if st.Hosts != 0 || terms != 4 {
		t.Fatalf("after scale-in: %d hosts, %d terminate decisions, want 0 and 4", st.Hosts, terms)
	}
}

// TestProvisionLeaderKillMidScaleUp (Must show 3): kill -9 the leader of
// a 3-server cluster in the middle of a scale-up of 3 hosts; afterwards
// exactly 3 containers exist, each one a recorded host of the pool (none
// orphaned), none doubled.
func TestProvisionLeaderKillMidScaleUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-server cluster and containers (skipped under -short)")
	}
	dockertest.Require(t)
	bin := staticGpulayer(t)
	pool := fmt.Sprintf("e2e-kill-%d", rand.IntN(1e6))
	t.Cleanup(func() { removePoolContainers(t, pool) })
	c := provisionServers(t, 3, bin)
	leader := c.waitStable(60 * time.Second)
	if code, body := c.send(leader, http.MethodPut, "/v1/node/pools", dockerPoolBody(t, pool, bin, 3, 3, time.Hour), nil); code != http.StatusOK {
		t.Fatalf("apply pool: %d %s", code, body)
	}
	// Mid scale-up: a container exists and creates are still unanswered.
	waittest.For(t, 3*time.Minute, "scale-up under way: a container made, creates pending", func() (bool, string) {
		st, msg := poolStatus(c, leader, pool)
		if st == nil {
			return false, msg
		}
		if len(st.Pending) == 0 && st.Hosts == 3 {
			t.Fatalf("the scale-up finished before the kill (hosts %d)", st.Hosts)
		}
		n := len(poolContainers(t, pool))
		return n >= 1 && len(st.Pending) > 0, fmt.Sprintf("pending %d hosts %d containers %d", len(st.Pending), st.Hosts, n)
	})
	t.Logf("killing leader %s with 3 creates pending; containers so far: %d", leader.name, len(poolContainers(t, pool)))
	leader.kill()
	next := c.waitStable(90 * time.Second)
	t.Logf("new leader %s", next.name)
	var st *api.NodePoolStatus
	waittest.For(t, 4*time.Minute, "3 hosts recorded and 3 containers", func() (bool, string) {
		var msg string
		st, msg = poolStatus(c, next, pool)
		if st == nil {
			return false, msg
		}
		n := len(poolContainers(t, pool))
		ready := 0
		for _, nd := range st.Nodes {
			if nd.State == "idle" {
				ready++
			}
		}
		running, _ := exec.Command("docker", "ps", "-q", "--filter", "label="+provdocker.LabelPool+"="+pool).Output()
		up := len(strings.Fields(string(running)))
		return st.Hosts == 3 && len(st.Pending) == 0 && n == 3 && up == 3 && ready == 3,
			fmt.Sprintf("hosts %d pending %d containers %d running %d ready nodes %d", st.Hosts, len(st.Pending), n, up, ready)
	})
	// Stays at 3 through more reconcile rounds (the default 30 s), and
	// every container is a recorded host.
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if n := len(poolContainers(t, pool)); n != 3 {
			t.Fatalf("containers = %d after the failover settled, want 3", n)
		}
		time.Sleep(2 * time.Second)
	}
	st, msg := poolStatus(c, next, pool)
	if st == nil {
		t.Fatal(msg)
	}
	recorded := map[string]bool{}
	for _, n := range st.Nodes {
		if n.HostID != "" {
			recorded[n.HostID] = true
		}
	}
	out, err := exec.Command("docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Names}} {{.Status}}", "--filter", "label="+provdocker.LabelPool+"="+pool).Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("docker ps (pool %s):\n%s", pool, out)
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, _, _ := strings.Cut(line, " ")
		ids = append(ids, id)
		if !recorded[id] {
			t.Errorf("container %s is no recorded host of the pool (orphan); recorded %v", id, recorded)
		}
	}
	sort.Strings(ids)
	if len(ids) != 3 {
		t.Fatalf("containers %v, want exactly 3", ids)
	}
	for _, d := range st.Decisions {
		t.Logf("decision: %s x%d: %s", d.Op, d.Count, d.Reason)
	}
}
