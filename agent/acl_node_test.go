package agent_test

import (
	"bytes"
	"encoding/json"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/structs"
)

// TestNodeIdentityWithACLs runs a served server agent and a client-only
// agent with ACLs on: the client registers with a node-write token from
// its acl block, its own routes resolve tokens through the server, its
// node secret rotates through its own agent for the holder of the current
// secret only (the old secret is refused after) and the client keeps
// running jobs with the new one.
func TestNodeIdentityWithACLs(t *testing.T) {
	on := true
	scfg := agent.DefaultConfig()
	scfg.Name = "acl-srv"
	scfg.Server.Enabled = true
	scfg.ACL = &agent.ACLConfig{Enabled: &on}
	srv := startAgent(t, scfg)
	s := &servedAgent{a: srv, url: "http://" + srv.HTTPAddr()}
	mgmt := s.bootstrap(t)
	joinToken := s.token(t, mgmt, "client-node", `node { policy = "write" }`)

	ccfg := agent.DefaultConfig()
	ccfg.Name = "acl-gpu-host"
	ccfg.Client.Enabled = true
	ccfg.Client.Servers = []string{srv.HTTPAddr()}
	ccfg.ACL = &agent.ACLConfig{Enabled: &on, Token: joinToken}
	cl := startAgent(t, ccfg)
	clURL := "http://" + cl.HTTPAddr()

	var nodeID string
	waittest.For(t, 30*time.Second, "the client node ready", func() (bool, string) {
		var nodes []*api.Node
		code, body := req(t, http.MethodGet, s.url+"/v1/nodes", mgmt, nil)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &nodes) != nil || len(nodes) != 1 {
			return false, body
		}
		nodeID = nodes[0].ID
		return nodes[0].Status == structs.NodeStatusReady, nodes[0].Status
	})
	// The client-only agent's own routes need a token, resolved by the server.
	if code, body := req(t, http.MethodGet, clURL+"/v1/agent/self", "", nil); code != http.StatusForbidden {
		t.Errorf("client agent self, anonymous: %d %s", code, body)
	}
	if code, body := req(t, http.MethodGet, clURL+"/v1/agent/self", mgmt, nil); code != http.StatusOK {
		t.Errorf("client agent self, management: %d %s", code, body)
	}

	secretFile := filepath.Join(ccfg.DataDir, "client", "node-secret")
	readSecret := func() string {
		b, err := os.ReadFile(secretFile)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	old := readSecret()
	reader := s.token(t, mgmt, "node-reader", `node { policy = "read" }`)
	if code, body := req(t, http.MethodPut, clURL+"/v1/client/node/secret/rotate", reader, struct{}{}); code != http.StatusForbidden {
		t.Fatalf("rotate with node read: %d %s", code, body)
	}
	// Hostile finding 10: a node-write (or management) token alone does
	// not rotate a client agent's secret; the node's current secret does.
	for who, tok := range map[string]string{"node-write": joinToken, "management": mgmt} {
		if code, body := req(t, http.MethodPut, clURL+"/v1/client/node/secret/rotate", tok, struct{}{}); code != http.StatusForbidden {
			t.Fatalf("rotate with a %s token: %d %s, want 403", who, code, body)
		}
	}
	if fresh := readSecret(); fresh != old {
		t.Fatal("a refused rotation changed the node secret")
	}
	code, body := reqNodeSecret(t, http.MethodPut, clURL+"/v1/client/node/secret/rotate", old, struct{}{})
	if code != http.StatusOK || !strings.Contains(body, nodeID) || strings.Contains(body, old) {
		t.Fatalf("rotate: %d %s", code, body)
	}
	fresh := readSecret()
	if fresh == old || fresh == "" {
		t.Fatalf("node secret file after rotate: %q (was %q)", fresh, old)
	}
	if code, body := req(t, http.MethodPut, s.url+"/v1/node/"+nodeID+"/heartbeat", old, map[string]string{"Status": "ready"}); code != http.StatusForbidden {
		t.Errorf("heartbeat with the old secret: %d %s, want 403", code, body)
	}
	// The client keeps working with the new secret: a job runs on it.
	if code, body := req(t, http.MethodPut, s.url+"/v1/jobs", mgmt, map[string]interface{}{"Job": map[string]interface{}{
		"ID": "after-rotate", "Type": "batch",
		"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1, "Tasks": []interface{}{map[string]interface{}{
			"Name": "t", "Driver": "native", "Config": map[string]interface{}{"command": "/bin/true"},
			"Resources": map[string]interface{}{"CPU": 10, "MemoryMB": 8},
		}}}},
	}}); code != http.StatusOK {
		t.Fatalf("submit: %d %s", code, body)
	}
	var allocID string
	waittest.For(t, 60*time.Second, "the job complete on the rotated node", func() (bool, string) {
		var allocs []*api.Allocation
		code, body := req(t, http.MethodGet, s.url+"/v1/job/after-rotate/allocations", mgmt, nil)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &allocs) != nil {
			return false, body
		}
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusComplete {
				allocID = a.ID
				return true, ""
			}
		}
		return false, body
	})
	// Logs through the server, proxied to the client-only agent, which
	// checks the token again through the server.
	logs := s.url + "/v1/client/fs/logs/" + allocID + "?task=t&type=stdout&plain=true"
	logReader := s.token(t, mgmt, "log-reader", `namespace "default" { capabilities = ["read-logs"] }`)
	if code, body := req(t, http.MethodGet, logs, logReader, nil); code != http.StatusOK {
		t.Errorf("logs through the server with read-logs: %d %s", code, body)
	}
	for who, tok := range map[string]string{"anonymous": "", "node-reader": reader} {
		if code, body := req(t, http.MethodGet, logs, tok, nil); code != http.StatusForbidden {
			t.Errorf("logs through the server as %s: %d %s", who, code, body)
		}
		if code, body := req(t, http.MethodGet, clURL+"/v1/client/fs/logs/"+allocID+"?task=t&type=stdout&plain=true", tok, nil); code != http.StatusForbidden {
			t.Errorf("logs from the client agent as %s: %d %s", who, code, body)
		}
	}
	var node api.Node
	if code, body := req(t, http.MethodGet, s.url+"/v1/node/"+nodeID, mgmt, nil); code != http.StatusOK || json.Unmarshal([]byte(body), &node) != nil || node.Status != structs.NodeStatusReady {
		t.Errorf("node after rotate: %d %s", code, body)
	}
}

// TestSecretsNeverLogged runs a served server and client agent logging at
// TRACE, bootstraps, makes tokens, uses them (also wrong ones), rotates
// the node secret, and finds no secret in the log.
func TestSecretsNeverLogged(t *testing.T) {
	var logBuf lockedBuffer
	cfg := agent.DefaultConfig()
	cfg.Name = "acl-log"
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = taskUserDir(t)
	cfg.Server.Enabled = true
	cfg.Client.Enabled = true
	cfg.LogLevel = "TRACE"
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = freePort(t), freePort(t), freePort(t)
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &logBuf}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	s := &servedAgent{a: a, url: "http://" + a.HTTPAddr(), dataDir: cfg.DataDir}
	mgmt := s.bootstrap(t)
	tok := s.token(t, mgmt, "w", `node { policy = "write" }`)
	req(t, http.MethodGet, s.url+"/v1/nodes", tok, nil)
	req(t, http.MethodPut, s.url+"/v1/jobs", "wrong-"+tok, map[string]string{})
	before, err := os.ReadFile(filepath.Join(cfg.DataDir, "client", "node-secret"))
	if err != nil {
		t.Fatal(err)
	}
	req(t, http.MethodPut, s.url+"/v1/client/node/secret/rotate", tok, struct{}{})
	reqNodeSecret(t, http.MethodPut, s.url+"/v1/client/node/secret/rotate", strings.TrimSpace(string(before)), struct{}{})
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, "client", "node-secret"))
	if err != nil {
		t.Fatal(err)
	}
	logs := logBuf.String()
	if !strings.Contains(logs, "node secret rotated") {
		t.Fatalf("the log is not the agent's (no rotation line):\n%.2000s", logs)
	}
	for name, secret := range map[string]string{"management": mgmt, "client token": tok, "node secret": strings.TrimSpace(string(b)), "old node secret": strings.TrimSpace(string(before))} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s appears in the log", name)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the agent's concurrent logging.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
