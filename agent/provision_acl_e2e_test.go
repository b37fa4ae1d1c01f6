package agent_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	provdocker "github.com/gpulayer/gpulayer/server/provision/docker"
)

// TestProvisionDockerJoinTokenWithACLs: with ACLs on, the server's
// provision_join_token (a client token with node write only) is what the
// pool's hosts join with: a one-GPU batch job queued in an empty docker
// pool gets a host that registers and runs it. The token's secret never
// shows in the pool's API reads, `node pool status`, the server's log,
// the containers' labels, environment, command or logs.
func TestProvisionDockerJoinTokenWithACLs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs containers (skipped under -short)")
	}
	dockertest.Require(t)
	bin := staticGpulayer(t)
	pool := fmt.Sprintf("e2e-acl-%d", rand.IntN(1e6))
	t.Cleanup(func() { removePoolContainers(t, pool) })

	root := t.TempDir()
	cfgPath := filepath.Join(root, "server.hcl")
	writeCfg := func(joinToken string) {
		hcl := "server {\n  encrypt = \"" + clusterGossipKey + "\"\n  provision_docker_binaries = [\"" + bin + "\"]\n"
		if joinToken != "" {
			hcl += "  provision_join_token = \"" + joinToken + "\"\n"
		}
		hcl += "}\nacl {\n  enabled = true\n}\n"
		if err := os.WriteFile(cfgPath, []byte(hcl), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("")
	c := &testCluster{t: t}
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: tokenTransport{c: c}}
	hp, rp, sp := freePort(t), freePort(t), freePort(t)
	srv := &proc{t: t, name: "server0", bin: bin, httpAddr: fmt.Sprintf("127.0.0.1:%d", hp), raftAddr: fmt.Sprintf("127.0.0.1:%d", rp),
		args: []string{"agent", "-server", "-bootstrap-expect=1", "-data-dir=" + filepath.Join(root, "server0"), "-bind=127.0.0.1",
			fmt.Sprintf("-http-port=%d", hp), fmt.Sprintf("-raft-port=%d", rp), fmt.Sprintf("-serf-port=%d", sp),
			"-node=server0", "-log-level=DEBUG", "-config=" + cfgPath}}
	c.servers = []*proc{srv}
	t.Cleanup(c.stopAll)
	srv.start()
	// The join token is a client token made after the bootstrap; the
	// server is restarted with it in its config.
	joinToken := c.bootstrapACL(srv, 90*time.Second)
	srv.stop()
	writeCfg(joinToken)
	srv.start()
	c.waitStable(90 * time.Second)

	if code, body := c.send(srv, http.MethodPut, "/v1/node/pools", dockerPoolBody(t, pool, bin, 0, 1, 5*time.Second), nil); code != http.StatusOK {
		t.Fatalf("apply pool: %d %s", code, body)
	}
	id := pool + "-job"
	job := map[string]any{"ID": id, "Type": "batch", "NodePool": pool,
		"TaskGroups": []any{map[string]any{"Name": "g", "Count": 1,
			"Tasks": []any{map[string]any{"Name": "t", "Driver": "native",
				"Config":    map[string]any{"command": provdocker.AgentPath, "args": []string{"version"}},
				"Resources": map[string]any{"CPU": 100, "MemoryMB": 32, "Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": 1}}}}}}}}
	if code, body := c.send(srv, http.MethodPut, "/v1/jobs", map[string]any{"Job": job}, nil); code != http.StatusOK {
		t.Fatalf("register %s: %d %s", id, code, body)
	}
	var reads []string // bodies that must not hold the token
	waittest.For(t, 4*time.Minute, "the job completes on a host that joined with the token", func() (bool, string) {
		var allocs []*api.Allocation
		if code, body := c.send(srv, http.MethodGet, "/v1/job/"+id+"/allocations", nil, &allocs); code != http.StatusOK {
			return false, body
		}
		var states []string
		done := false
		for _, a := range allocs {
			states = append(states, a.ClientStatus+"@"+a.NodeName)
			done = done || a.ClientStatus == "complete"
		}
		_, st := c.send(srv, http.MethodGet, "/v1/node/pool/"+pool+"/status", nil, nil)
		reads = append(reads[:0], st)
		return done, fmt.Sprintf("allocs %v; containers %d; status %s", states, len(poolContainers(t, pool)), st)
	})
	var nodes []*api.NodeListStub
	if code, body := c.send(srv, http.MethodGet, "/v1/nodes", nil, &nodes); code != http.StatusOK {
		t.Fatalf("nodes: %d %s", code, body)
	}
	joined := 0
	for _, n := range nodes {
		if n.NodePool == pool {
			joined++
		}
	}
	if joined == 0 {
		t.Fatalf("no node of pool %s registered: %+v", pool, nodes)
	}
	for _, path := range []string{"/v1/node/pools", "/v1/node/pool/" + pool, "/v1/node/pool/" + pool + "/status", "/v1/nodes", "/v1/agent/self"} {
		code, body := c.send(srv, http.MethodGet, path, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		reads = append(reads, path+": "+body)
	}
	// The CLI's `node pool status` reads the same route; run it too.
	cli := exec.Command(bin, "node", "pool", "status", pool)
	cli.Env = append(os.Environ(), "NOMAD_ADDR="+srv.url(), "GPULAYER_ADDR="+srv.url(), "NOMAD_TOKEN="+c.token, "GPULAYER_TOKEN="+c.token)
	out, err := cli.CombinedOutput()
	if err != nil {
		t.Fatalf("node pool status: %v\n%s", err, out)
	}
	reads = append(reads, "node pool status: "+string(out))
	// ACLs are on: an anonymous read is refused.
	if resp, err := http.Get(srv.url() + "/v1/nodes"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous GET /v1/nodes: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	ctrs := poolContainers(t, pool)
	if len(ctrs) == 0 {
		t.Fatal("no container of the pool")
	}
	for _, ctr := range ctrs {
		// The host's agent config holds the token (that is how it joined).
		cfg, err := exec.Command("docker", "cp", ctr+":"+provdocker.ConfigPath, "-").Output()
		if err != nil || !bytes.Contains(cfg, []byte(joinToken)) {
			t.Fatalf("container %s: agent config without the join token (%v)", ctr, err)
		}
		insp, err := exec.Command("docker", "inspect", "-f", "{{json .Config.Labels}} {{json .Config.Env}} {{json .Config.Cmd}} {{json .Config.Entrypoint}}", ctr).CombinedOutput()
		if err != nil {
			t.Fatalf("docker inspect: %v %s", err, insp)
		}
		logs, _ := exec.Command("docker", "logs", ctr).CombinedOutput()
		reads = append(reads, "container "+ctr+" config: "+string(insp), "container "+ctr+" logs: "+string(logs))
	}
	reads = append(reads, "server log: "+srv.logText())
	for _, r := range reads {
		if strings.Contains(r, joinToken) {
			i := strings.Index(r, ":")
			t.Errorf("the join token shows in %s", r[:i])
		}
	}
	t.Logf("node pool status:\n%s", out)
}
