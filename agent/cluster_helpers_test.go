package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one real gpulayer agent process that a test can kill -9 and
// start again on the same data dir and ports.
type proc struct {
	t    testing.TB
	name string
	bin  string
	args []string
	// env, when set, is added to the environment the process inherits.
	env      []string
	httpAddr string // 127.0.0.1:port
	raftAddr string // 127.0.0.1:port; empty for a client
	// external marks an agent the test did not start (a container): it
	// counts as alive while set.
	external bool
	// scheme is the API's URL scheme; empty means "http".
	scheme string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedWriter
	buf  *bytes.Buffer
}

// start launches the process without waiting for it to be healthy.
func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf == nil {
		p.buf = &bytes.Buffer{}
		p.log = &lockedWriter{w: p.buf}
	}
	fmt.Fprintf(p.log, "==> %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
}

// logCount returns how many times substr occurs in the process's output
// so far (all its runs).
func (p *proc) logCount(substr string) int {
	p.mu.Lock()
	l, buf := p.log, p.buf
	p.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(buf.String(), substr)
}

// alive reports whether the process is running.
func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.external {
		return true
	}
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	fmt.Fprintf(p.log, "==> %s kill -9\n", time.Now().Format(time.RFC3339Nano))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits up to 20 seconds, then kills.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		p.t.Errorf("%s did not stop within 20s of SIGTERM", p.name)
	}
}

func (p *proc) url() string {
	if p.scheme != "" {
		return p.scheme + "://" + p.httpAddr
	}
	return "http://" + p.httpAddr
}

func (p *proc) logText() string {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	return p.buf.String()
}

// testCluster is a set of real server and client agent processes on
// 127.0.0.1.
type testCluster struct {
	t       testing.TB
	servers []*proc
	clients []*proc
	// http is the client for the test's own requests, with a timeout so a
	// request to a hung server fails instead of hanging the test. In
	// clusters from startCluster it sends token (tokenTransport).
	http *http.Client
	// token is the management token's secret once the cluster's ACLs are
	// bootstrapped (startCluster); "" before.
	token string
}

// tokenTransport adds the cluster's management token to every request
// that carries none.
// base sends the request on; nil means http.DefaultTransport.
type tokenTransport struct {
	c    *testCluster
	base http.RoundTripper
}

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tt.c.token != "" && r.Header.Get("X-Nomad-Token") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Nomad-Token", tt.c.token)
	}
	if tt.base != nil {
		return tt.base.RoundTrip(r)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// bootstrapACL bootstraps the cluster's ACLs through p (retrying while
// there is no leader), keeps the management secret in c.token, and
// returns the secret of a new client token that may register nodes
// (policy "client-node": node write), for the client agents' -acl-token.
func (c *testCluster) bootstrapACL(p *proc, timeout time.Duration) string {
	c.t.Helper()
	waittest.For(c.t, timeout, "ACL bootstrap", func() (bool, string) {
		var tok struct{ SecretID string }
		code, body := c.send(p, http.MethodPut, "/v1/acl/bootstrap", nil, &tok)
		if code == http.StatusOK {
			c.token = tok.SecretID
		}
		return code == http.StatusOK && c.token != "", fmt.Sprintf("%d %s", code, body)
	})
	policy := map[string]string{"Name": "client-node", "Rules": `node { policy = "write" }`}
	if code, body := c.send(p, http.MethodPut, "/v1/acl/policy/client-node", policy, nil); code != http.StatusOK {
		c.t.Fatalf("create the client-node policy: %d %s", code, body)
	}
	var tok struct{ SecretID string }
	req := map[string]interface{}{"Name": "clients", "Type": "client", "Policies": []string{"client-node"}}
	if code, body := c.send(p, http.MethodPut, "/v1/acl/token", req, &tok); code != http.StatusOK || tok.SecretID == "" {
		c.t.Fatalf("create the clients' token: %d %s", code, body)
	}
	return tok.SecretID
}

// send makes one JSON request to p with c.http and decodes a 200 answer
// into out (when not nil). It returns the status and the body.
func (c *testCluster) send(p *proc, method, path string, in, out interface{}) (int, string) {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.url()+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, err.Error()
		}
	}
	return resp.StatusCode, string(b)
}

// startCluster starts nServers servers (bootstrap-expect = nServers, each
// retry-joining the others' gossip ports) and nClients client-only agents
// with gpusPerClient simulated GPUs each, and waits until a leader is
// elected, every server lists nServers Raft peers and every client node
// is ready. Processes stop (SIGTERM) at the end of the test; when the test
// failed, the tail of each log is printed.
func startCluster(t testing.TB, nServers, nClients, gpusPerClient int) *testCluster {
	t.Helper()
	bin := gpulayerBinary(t)
	root := t.TempDir()
	c := &testCluster{t: t}
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: tokenTransport{c: c}}
	type ports struct{ http, raft, serf int }
	sp := make([]ports, nServers)
	for i := range sp {
		sp[i] = ports{freePort(t), freePort(t), freePort(t)}
	}
	for i := range sp {
		args := []string{"agent", "-server", fmt.Sprintf("-bootstrap-expect=%d", nServers),
			"-data-dir=" + filepath.Join(root, fmt.Sprintf("server%d", i)), "-bind=127.0.0.1",
			fmt.Sprintf("-http-port=%d", sp[i].http), fmt.Sprintf("-raft-port=%d", sp[i].raft),
			fmt.Sprintf("-serf-port=%d", sp[i].serf), fmt.Sprintf("-node=server%d", i), "-log-level=DEBUG",
			clusterAgentConfig(t, filepath.Join(root, fmt.Sprintf("server%d.hcl", i)), "server")}
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
	// ACLs are on (the default outside -dev): bootstrap, then the test's
	// requests carry the management token and the clients a token that
	// may register nodes.
	clientToken := c.bootstrapACL(c.servers[0], 60*time.Second)
	c.waitStable(60 * time.Second)

	servers := strings.Join(c.httpAddrs(), ",")
	for i := 0; i < nClients; i++ {
		letTaskUsersIn(t, filepath.Join(root, fmt.Sprintf("client%d", i)))
		args := []string{"agent", "-client", "-servers=" + servers, "-acl-token=" + clientToken,
			"-data-dir=" + filepath.Join(root, fmt.Sprintf("client%d", i)), "-bind=127.0.0.1",
			fmt.Sprintf("-http-port=%d", freePort(t)), fmt.Sprintf("-node=client%d", i),
			fmt.Sprintf("-dev-gpus=%d", gpusPerClient), "-log-level=DEBUG",
			clusterAgentConfig(t, filepath.Join(root, fmt.Sprintf("client%d.hcl", i)), "client")}
		p := &proc{t: t, name: fmt.Sprintf("client%d", i), bin: bin, args: args}
		for _, a := range args {
			if strings.HasPrefix(a, "-http-port=") {
				p.httpAddr = "127.0.0.1:" + strings.TrimPrefix(a, "-http-port=")
			}
		}
		c.clients = append(c.clients, p)
		p.start()
	}
	if nClients > 0 {
		c.waitClientsReady(nClients, 60*time.Second)
	}
	return c
}

// stopAll stops every process (clients first) and, when the test failed,
// logs the tail of each one's log.
func (c *testCluster) stopAll() {
	for _, p := range append(append([]*proc{}, c.clients...), c.servers...) {
		p.stop()
	}
	if c.t.Failed() {
		for _, p := range append(append([]*proc{}, c.servers...), c.clients...) {
			logs := p.logText()
			if len(logs) > 20000 {
				logs = "...\n" + logs[len(logs)-20000:]
			}
			c.t.Logf("---- %s log ----\n%s", p.name, logs)
		}
	}
}

// waitClientsReady waits until servers[0] lists n client nodes as ready.
func (c *testCluster) waitClientsReady(n int, timeout time.Duration) {
	c.t.Helper()
	waittest.For(c.t, timeout, fmt.Sprintf("%d client nodes ready", n), func() (bool, string) {
		var nodes []struct{ ID, Name, Status string }
		if err := c.get(c.servers[0], "/v1/nodes", &nodes); err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, nd := range nodes {
			if nd.Status == "ready" {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d of %d ready", ready, len(nodes))
	})
}

// clusterGossipKey is the gossip key (base64 of 32 bytes) every
// startCluster server shares: a served server refuses to join others over
// unencrypted gossip without tls.rpc.
const clusterGossipKey = "Z3B1bGF5ZXItdGVzdC1jbHVzdGVyLWdvc3NpcC1rZXk="

// clusterAgentConfig writes the agent config file every agent of a
// startCluster cluster loads (role is "server" or "client") to path and
// returns the -config flag naming it. It is the one place for settings
// all cluster test agents share (the servers' gossip key, an acl block, a
// bootstrap token, TLS).
func clusterAgentConfig(t testing.TB, path, role string) string {
	t.Helper()
	hcl := "# gpulayer test cluster agent (" + role + ")\n"
	if role == "server" {
		hcl += "server {\n  encrypt = \"" + clusterGossipKey + "\"\n}\n"
	}
	if role == "client" {
		// Dynamic ports above the ephemeral range, clear of the
		// harness's agent ports (services_e2e_test.go).
		hcl += fmt.Sprintf("client {\n  min_dynamic_port = %d\n  max_dynamic_port = %d\n}\n", testMinDynamicPort, testMaxDynamicPort)
	}
	if err := os.WriteFile(path, []byte(hcl), 0o600); err != nil {
		t.Fatalf("write agent config: %v", err)
	}
	return "-config=" + path
}

// waitStable waits until every running server names the same leader,
// which has established leadership (its /v1/status/health answers 200),
// and lists every server as a Raft peer.
func (c *testCluster) waitStable(timeout time.Duration) *proc {
	c.t.Helper()
	var leader *proc
	waittest.For(c.t, timeout, "a stable leader", func() (bool, string) {
		leader = nil
		var addr string
		for _, p := range c.servers {
			if !p.alive() {
				continue
			}
			var l string
			if err := c.get(p, "/v1/status/leader", &l); err != nil {
				return false, err.Error()
			}
			if l == "" || (addr != "" && l != addr) {
				return false, fmt.Sprintf("%s sees leader %q", p.name, l)
			}
			addr = l
			var peers []string
			if err := c.get(p, "/v1/status/peers", &peers); err != nil {
				return false, err.Error()
			}
			if len(peers) != len(c.servers) {
				return false, fmt.Sprintf("%s lists %d peers", p.name, len(peers))
			}
		}
		leader = c.byRaftAddr(addr)
		if leader == nil {
			return false, fmt.Sprintf("leader %q is not one of ours", addr)
		}
		if err := c.get(leader, "/v1/status/health", nil); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return leader
}

// leader returns the current leader as the first live server that knows
// one sees it, or nil.
func (c *testCluster) leader() *proc {
	for _, p := range c.servers {
		if !p.alive() {
			continue
		}
		var l string
		if err := c.get(p, "/v1/status/leader", &l); err == nil && l != "" {
			if lp := c.byRaftAddr(l); lp != nil && lp.alive() {
				return lp
			}
		}
	}
	return nil
}

func (c *testCluster) byRaftAddr(addr string) *proc {
	for _, p := range c.servers {
		if p.raftAddr == addr {
			return p
		}
	}
	return nil
}

func (c *testCluster) httpAddrs() []string {
	var out []string
	for _, p := range c.servers {
		out = append(out, p.httpAddr)
	}
	return out
}

// get GETs path from p and decodes the JSON answer into out (when not
// nil); a non-200 answer is an error carrying the status and body.
func (c *testCluster) get(p *proc, path string, out interface{}) error {
	resp, err := c.http.Get(p.url() + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s%s: %d %s", p.name, path, resp.StatusCode, bytes.TrimSpace(body))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// stateHashes returns each live server's state hash and applied index.
func (c *testCluster) stateHashes() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range c.servers {
		var h struct {
			Hash  string
			Index uint64
		}
		if err := c.get(p, "/v1/operator/state-hash", &h); err != nil {
			return nil, err
		}
		out[p.name] = fmt.Sprintf("%s@%d", h.Hash, h.Index)
	}
	return out, nil
}

// waitSameState waits until every server reports the same state hash at
// the same index, twice in a row half a second apart (so writes have
// stopped), and returns it.
func (c *testCluster) waitSameState(timeout time.Duration) string {
	c.t.Helper()
	var prev, got string
	waittest.For(c.t, timeout, "the servers' FSMs to agree", func() (bool, string) {
		hashes, err := c.stateHashes()
		if err != nil {
			return false, err.Error()
		}
		got = ""
		for _, h := range hashes {
			if got != "" && h != got {
				prev = ""
				return false, fmt.Sprint(hashes)
			}
			got = h
		}
		if got != prev {
			prev = got
			time.Sleep(500 * time.Millisecond)
			return false, "settling: " + got
		}
		return true, ""
	})
	return got
}
