package agent_test

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/agent/tlsutil/tlsutiltest"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tlsAgentSpec describes one agent of a TLS test cluster; tlsAgentHCL
// renders it as the agent's config file.
type tlsAgentSpec struct {
	name, dataDir                string
	httpPort, raftPort, serfPort int
	// Server role.
	server    bool
	expect    int
	retryJoin []string
	encrypt   string
	// Client role.
	client  bool
	servers []string
	// tls block files.
	caFile, certFile, keyFile string
	// aclToken is a client's token that may register nodes (acl.token).
	aclToken string
}

// tlsAgentHCL is the one place the TLS cluster's agent config is written:
// everything a production agent sets, ACLs included (on by default; the
// block says so anyway).
func tlsAgentHCL(s tlsAgentSpec) string {
	q := func(v string) string { return strconv.Quote(v) }
	list := func(vs []string) string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = q(v)
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name = %s\ndata_dir = %s\nbind_addr = \"127.0.0.1\"\nlog_level = \"DEBUG\"\n", q(s.name), q(s.dataDir))
	fmt.Fprintf(&b, "ports {\n  http = %d\n  raft = %d\n  serf = %d\n}\n", s.httpPort, s.raftPort, s.serfPort)
	if s.server {
		fmt.Fprintf(&b, "server {\n  enabled = true\n  bootstrap_expect = %d\n  retry_join = %s\n  encrypt = %s\n}\n", s.expect, list(s.retryJoin), q(s.encrypt))
	}
	if s.client {
		fmt.Fprintf(&b, "client {\n  enabled = true\n  servers = %s\n  dev_gpus = 0\n}\n", list(s.servers))
	}
	fmt.Fprintf(&b, "tls {\n  http = true\n  rpc = true\n  ca_file = %s\n  cert_file = %s\n  key_file = %s\n  verify_server_hostname = true\n  verify_https_client = true\n}\n",
		q(s.caFile), q(s.certFile), q(s.keyFile))
	if s.aclToken != "" {
		fmt.Fprintf(&b, "acl {\n  enabled = true\n  token = %s\n}\n", q(s.aclToken))
	} else {
		b.WriteString("acl {\n  enabled = true\n}\n")
	}
	return b.String()
}

// tlsCluster is a testCluster of agents with mTLS on HTTP and Raft and an
// encrypted gossip; c.http presents a CLI certificate.
type tlsCluster struct {
	*testCluster
	pki     *tlsutiltest.TestPKI
	root    string
	bin     string
	gossip  string
	cliCert string
	cliKey  string
	serfs   []int
}

// startTLSCluster starts nServers servers and nClients client agents from
// tlsAgentHCL configs and waits for a stable leader and ready nodes.
func startTLSCluster(t *testing.T, nServers, nClients int) *tlsCluster {
	t.Helper()
	root := taskUserDir(t)
	pki, err := tlsutiltest.WriteTestPKI(root)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	c := &tlsCluster{testCluster: &testCluster{t: t}, pki: pki, root: root, bin: gpulayerBinary(t), gossip: base64.StdEncoding.EncodeToString(key)}
	c.cliCert, c.cliKey, err = pki.Cert("cli", tlsutil.CertOptions{Role: tlsutil.RoleCLI})
	if err != nil {
		t.Fatal(err)
	}
	c.http = httpsClient(t, pki, tlsutil.RoleCLI)
	// Once bootstrapped, the test's requests carry the management token.
	c.http.Transport = tokenTransport{c: c.testCluster, base: c.http.Transport}
	t.Cleanup(c.stopAll)
	type ports struct{ http, raft, serf int }
	sp := make([]ports, nServers)
	for i := range sp {
		sp[i] = ports{freePort(t), freePort(t), freePort(t)}
		c.serfs = append(c.serfs, sp[i].serf)
	}
	for i := range sp {
		var join []string
		for j := range sp {
			if j != i {
				join = append(join, fmt.Sprintf("127.0.0.1:%d", sp[j].serf))
			}
		}
		name := fmt.Sprintf("server%d", i)
		p := c.agent(tlsAgentSpec{name: name, server: true, expect: nServers, retryJoin: join, encrypt: c.gossip,
			httpPort: sp[i].http, raftPort: sp[i].raft, serfPort: sp[i].serf}, tlsutil.RoleServer)
		c.servers = append(c.servers, p)
		p.start()
	}
	// ACLs are on: until bootstrapped only health and bootstrap answer
	// (bootstrapACL retries while there is no leader), so bootstrap before
	// waiting for a stable leader through /v1/status/leader.
	clientToken := c.bootstrapACL(c.servers[0], 90*time.Second)
	c.waitStable(60 * time.Second)
	for i := 0; i < nClients; i++ {
		p := c.agent(tlsAgentSpec{name: fmt.Sprintf("client%d", i), client: true, servers: c.httpAddrs(), aclToken: clientToken,
			httpPort: freePort(t), raftPort: freePort(t), serfPort: freePort(t)}, tlsutil.RoleClient)
		c.clients = append(c.clients, p)
		p.start()
	}
	c.waitClientsReady(nClients, 60*time.Second)
	return c
}

// agent writes spec's config (with a new certificate of role) and returns
// the process, not started.
func (c *tlsCluster) agent(spec tlsAgentSpec, role tlsutil.Role) *proc {
	c.t.Helper()
	var err error
	spec.caFile = c.pki.CAFile
	spec.certFile, spec.keyFile, err = c.pki.Cert(spec.name, tlsutil.CertOptions{Role: role})
	if err != nil {
		c.t.Fatal(err)
	}
	spec.dataDir = filepath.Join(c.root, spec.name)
	cfgFile := filepath.Join(c.root, spec.name+".hcl")
	if err := os.WriteFile(cfgFile, []byte(tlsAgentHCL(spec)), 0o600); err != nil {
		c.t.Fatal(err)
	}
	p := &proc{t: c.t, name: spec.name, bin: c.bin, args: []string{"agent", "-config=" + cfgFile},
		httpAddr: fmt.Sprintf("127.0.0.1:%d", spec.httpPort), scheme: "https"}
	if spec.server {
		p.raftAddr = fmt.Sprintf("127.0.0.1:%d", spec.raftPort)
	}
	return p
}

// cli runs the gpulayer subcommand sub ("alloc logs") with the TLS flags
// against p, then args.
func (c *tlsCluster) cli(p *proc, sub string, args ...string) (string, error) {
	argv := append(strings.Fields(sub), "-address="+p.url(), "-ca-cert="+c.pki.CAFile, "-client-cert="+c.cliCert, "-client-key="+c.cliKey, "-token="+c.token)
	argv = append(argv, args...)
	cmd := exec.Command(c.bin, argv...)
	cmd.Env = append(os.Environ(), "GPULAYER_ADDR=", "GPULAYER_CACERT=", "NOMAD_CACERT=", "GPULAYER_TOKEN=", "NOMAD_TOKEN=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTLSClusterEndToEnd is must-show 3 for TLS: three servers and two
// clients, real processes, with mTLS on the HTTP API and Raft and an
// encrypted gossip. A batch job runs end to end, its logs come back
// through a server (server-to-node over mTLS), the CLI works with the TLS
// flags, plain HTTP and plain Raft are refused, and a fourth "server"
// with a client certificate joins gossip but never becomes a Raft peer.
func TestTLSClusterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five agent processes")
	}
	c := startTLSCluster(t, 3, 2)
	leader := c.waitStable(30 * time.Second)
	var allocID string

	t.Run("a job runs end to end", func(t *testing.T) {
		job := map[string]interface{}{"Job": map[string]interface{}{
			"ID": "tls-echo", "Name": "tls-echo", "Type": "batch",
			"TaskGroups": []interface{}{map[string]interface{}{
				"Name": "g", "Count": 2,
				"Tasks": []interface{}{map[string]interface{}{
					"Name": "t", "Driver": "native",
					"Config":    map[string]interface{}{"command": "/bin/echo", "args": []string{"hello over mtls"}},
					"Resources": map[string]interface{}{"CPU": 10, "MemoryMB": 8},
				}},
			}},
		}}
		body, _ := json.Marshal(job)
		// Submitted to a follower, so forwarding to the leader is over
		// mTLS too.
		var follower *proc
		for _, p := range c.servers {
			if p != leader {
				follower = p
				break
			}
		}
		if err := c.putJob(follower, body); err != nil {
			t.Fatal(err)
		}
		var allocs []struct{ ID, ClientStatus, NodeID string }
		waittest.For(t, 60*time.Second, "both allocations complete", func() (bool, string) {
			if err := c.get(c.servers[0], "/v1/job/tls-echo/allocations", &allocs); err != nil {
				return false, err.Error()
			}
			done := 0
			for _, a := range allocs {
				if a.ClientStatus == "complete" {
					done++
				}
			}
			return done == 2, fmt.Sprintf("%+v", allocs)
		})
		// Logs through a server: the server proxies to the node's agent
		// over mTLS, verifying its client certificate.
		resp, err := c.http.Get(follower.url() + "/v1/client/fs/logs/" + allocs[0].ID + "?task=t&type=stdout&plain=true")
		if err != nil {
			t.Fatal(err)
		}
		logs, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(logs), "hello over mtls") {
			t.Fatalf("logs through %s: %d %q", follower.name, resp.StatusCode, logs)
		}
		allocID = allocs[0].ID
	})

	t.Run("the CLI works with the TLS flags", func(t *testing.T) {
		out, err := c.cli(c.servers[1], "job status")
		if err != nil || !strings.Contains(out, "tls-echo") {
			t.Fatalf("job status: %v\n%s", err, out)
		}
		out, err = c.cli(c.servers[2], "server members")
		if err != nil || strings.Count(out, "alive") < 3 {
			t.Fatalf("server members: %v\n%s", err, out)
		}
		if allocID != "" {
			// Streams through a server to the node, both over mTLS.
			out, err = c.cli(c.servers[0], "alloc logs", allocID, "t")
			if err != nil || !strings.Contains(out, "hello over mtls") {
				t.Fatalf("alloc logs: %v\n%s", err, out)
			}
		}
		// Without the client certificate the agent does not answer.
		cmd := exec.Command(c.bin, "job", "status", "-address="+c.servers[0].url(), "-ca-cert="+c.pki.CAFile)
		cmd.Env = append(os.Environ(), "GPULAYER_CLIENT_CERT=", "GPULAYER_CLIENT_KEY=", "NOMAD_CLIENT_CERT=", "NOMAD_CLIENT_KEY=")
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("job status without a client certificate succeeded:\n%s", out)
		}
	})

	t.Run("ACLs hold over mTLS", func(t *testing.T) {
		// A CLI certificate is not a token: without one the API refuses.
		anon := httpsClient(t, c.pki, tlsutil.RoleCLI)
		resp, err := anon.Get(leader.url() + "/v1/jobs")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET /v1/jobs without a token: %d %q, want 403", resp.StatusCode, b)
		}
		// The bootstrap route answers Nomad's shape once, then refuses
		// with Nomad's message (what `nomad acl bootstrap` prints).
		req, _ := http.NewRequest(http.MethodPost, c.servers[2].url()+"/v1/acl/bootstrap", nil)
		resp, err = anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "ACL bootstrap already done") {
			t.Fatalf("second bootstrap: %d %q", resp.StatusCode, b)
		}
		out, err := c.cli(c.servers[1], "acl token self", "-json")
		if err != nil {
			t.Fatalf("acl token self: %v\n%s", err, out)
		}
		var self struct {
			AccessorID, SecretID, Name, Type string
			Global                           bool
			CreateTime                       time.Time
			CreateIndex, ModifyIndex         uint64
		}
		if err := json.Unmarshal([]byte(out), &self); err != nil {
			t.Fatalf("acl token self -json: %v\n%s", err, out)
		}
		if self.Type != "management" || self.AccessorID == "" || self.SecretID != c.token || self.CreateTime.IsZero() || self.CreateIndex == 0 {
			t.Fatalf("the bootstrap token reads %+v", self)
		}
	})

	t.Run("plain HTTP is refused", func(t *testing.T) {
		for _, p := range append(append([]*proc{}, c.servers...), c.clients...) {
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.httpAddr + "/v1/jobs")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTPS") {
				t.Errorf("plain HTTP to %s: %d %q", p.name, resp.StatusCode, b)
			}
		}
	})

	t.Run("plain and client-certificate Raft dials are refused", func(t *testing.T) {
		trans, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 1, 5*time.Second, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		defer trans.Close()
		var resp raft.AppendEntriesResponse
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())}, Term: 1 << 20}
		if err := trans.AppendEntries("server0", raft.ServerAddress(leader.raftAddr), req, &resp); err == nil {
			t.Fatalf("a plain TCP AppendEntries got an answer: %+v", resp)
		}
		cf, kf, err := c.pki.Cert("rogue-dial", tlsutil.CertOptions{Role: tlsutil.RoleClient})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", leader.raftAddr,
			&tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}) //nolint:gosec // the rogue does not care who answers
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, werr := conn.Write([]byte{0})
			_, rerr := conn.Read(make([]byte, 1))
			conn.Close()
			if werr == nil && rerr == nil {
				t.Fatal("a client certificate's TLS connection to Raft stayed open")
			}
		}
		// The leader kept its seat: a rogue term would have deposed it.
		if l := c.waitStable(30 * time.Second); l != leader {
			t.Fatalf("leadership moved from %s to %s after the rogue dials", leader.name, l.name)
		}
	})

	t.Run("a client certificate cannot join as a server", func(t *testing.T) {
		var join []string
		for _, s := range c.serfs {
			join = append(join, fmt.Sprintf("127.0.0.1:%d", s))
		}
		rogue := c.agent(tlsAgentSpec{name: "rogue", server: true, expect: 3, retryJoin: join, encrypt: c.gossip,
			httpPort: freePort(t), raftPort: freePort(t), serfPort: freePort(t)}, tlsutil.RoleClient)
		rogue.start()
		defer rogue.stop()
		leader := c.waitStable(30 * time.Second)
		// It has the gossip key, so it is a member; the leader proves
		// its Raft address before adding it and refuses.
		waittest.For(t, 30*time.Second, "the leader refuses the rogue", func() (bool, string) {
			return strings.Contains(leader.logText(), "not adding server to raft"), "no refusal logged yet"
		})
		var conf struct{ Servers []struct{ ID string } }
		if err := c.get(leader, "/v1/operator/raft/configuration", &conf); err != nil {
			t.Fatal(err)
		}
		if len(conf.Servers) != 3 {
			t.Fatalf("raft configuration %+v, want the three servers only", conf.Servers)
		}
		for _, s := range conf.Servers {
			if s.ID == "rogue" {
				t.Fatal("the rogue became a raft peer")
			}
		}
	})
}
