package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// reqNodeSecret sends one request carrying a node secret
// (X-Gpulayer-Node-Secret) and no token, with an optional JSON body, and
// returns the status and body.
func reqNodeSecret(t testing.TB, method, url, secret string, body interface{}) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(structs.HeaderNodeSecret, secret)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProxiedRoutesReachClientOnlyAgentWithACLs: with ACLs on, a served
// server agent proxies logs, exec, signal, restart and client stats to a
// client-only agent, authenticating with that node's secret instead of
// the caller's token (hostile finding 3): a user holding exactly the
// rights of each route gets its answer through the server, before and
// after the node's secret is rotated; the client-only agent still serves
// direct callers by their token; and a token that lacks the right is
// refused by the server before anything reaches the node.
func TestProxiedRoutesReachClientOnlyAgentWithACLs(t *testing.T) {
	on := true
	scfg := agent.DefaultConfig()
	scfg.Name = "proxy-srv"
	scfg.Server.Enabled = true
	scfg.ACL = &agent.ACLConfig{Enabled: &on}
	srv := startAgent(t, scfg)
	s := &servedAgent{a: srv, url: "http://" + srv.HTTPAddr()}
	mgmt := s.bootstrap(t)
	joinToken := s.token(t, mgmt, "client-node", `node { policy = "write" }`)

	ccfg := agent.DefaultConfig()
	ccfg.Name = "proxy-gpu-host"
	ccfg.Client.Enabled = true
	ccfg.Client.Servers = []string{srv.HTTPAddr()}
	ccfg.ACL = &agent.ACLConfig{Enabled: &on, Token: joinToken}
	cl := startAgent(t, ccfg)
	clURL := "http://" + cl.HTTPAddr()

	user := s.token(t, mgmt, "operator-user", `
namespace "default" { capabilities = ["read-job", "read-logs", "alloc-lifecycle", "alloc-exec"] }
node { policy = "read" }
`)
	reader := s.token(t, mgmt, "job-reader", `namespace "default" { capabilities = ["read-job"] }`)

	if code, body := req(t, http.MethodPut, s.url+"/v1/jobs", mgmt, map[string]interface{}{"Job": map[string]interface{}{
		"ID": "proxied", "Type": "service",
		"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1, "Tasks": []interface{}{map[string]interface{}{
			"Name": "t", "Driver": "native",
			"Config": map[string]interface{}{"command": "/bin/sh", "args": []string{"-c",
				`trap 'echo got-hup' HUP; echo started; while true; do sleep 0.1; done`}},
			"Resources": map[string]interface{}{"CPU": 100, "MemoryMB": 32},
		}}}},
	}}); code != http.StatusOK {
		t.Fatalf("submit: %d %s", code, body)
	}
	var alloc api.Allocation
	waittest.For(t, 30*time.Second, "the allocation running", func() (bool, string) {
		var allocs []*api.Allocation
		code, body := req(t, http.MethodGet, s.url+"/v1/job/proxied/allocations", mgmt, nil)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &allocs) != nil {
			return false, body
		}
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusRunning {
				alloc = *a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocations", len(allocs))
	})
	logsPath := "/v1/client/fs/logs/" + alloc.ID + "?task=t&type=stdout&plain=true"
	logs := func(base, tok string) string {
		code, body := req(t, http.MethodGet, base+logsPath, tok, nil)
		return fmt.Sprintf("%d %s", code, body)
	}
	waittest.Until(t, 20*time.Second, "the task's log through the server", func() bool {
		return strings.HasPrefix(logs(s.url, user), "200 ") && strings.Contains(logs(s.url, user), "started")
	})
	// A direct caller of the client-only agent is still served by token.
	if got := logs(clURL, user); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "started") {
		t.Errorf("logs from the client agent with the user's token: %.300s", got)
	}
	// The server refuses a token without the right before proxying.
	if got := logs(s.url, reader); !strings.HasPrefix(got, "403 ") {
		t.Errorf("logs through the server without read-logs: %.300s", got)
	}

	c, err := api.NewClient(&api.Config{Address: s.url, Token: user})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actions := func(round string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code, err := c.AllocExec(ctx, alloc.ID, "t", []string{"/bin/sh", "-c", "echo exec-ran; exit 3"}, false, nil, &stdout, &stderr)
		if err != nil || code != 3 || !strings.Contains(stdout.String(), "exec-ran") {
			t.Fatalf("%s: exec through the server: code %d, err %v, stdout %q, stderr %q", round, code, err, stdout.String(), stderr.String())
		}
		code, body := req(t, http.MethodGet, s.url+"/v1/client/stats?node_id="+alloc.NodeID, user, nil)
		var st structs.NodeDeviceStats
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.NodeID != alloc.NodeID {
			t.Fatalf("%s: client stats through the server: %d %s", round, code, body)
		}
		if err := c.AllocSignal(ctx, alloc.ID, "t", "SIGHUP"); err != nil {
			t.Fatalf("%s: signal through the server: %v", round, err)
		}
	}
	actions("before rotation")
	waittest.Until(t, 20*time.Second, "the task caught SIGHUP", func() bool { return strings.Contains(logs(s.url, user), "got-hup") })

	// Rotation keeps the proxy working: the server holds the new secret
	// once the rotation is committed, and the client-only agent compares
	// against its current one.
	secretFile := filepath.Join(ccfg.DataDir, "client", "node-secret")
	old, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := reqNodeSecret(t, http.MethodPut, clURL+"/v1/client/node/secret/rotate", strings.TrimSpace(string(old)), struct{}{}); code != http.StatusOK {
		t.Fatalf("rotate with the node's secret: %d %s", code, body)
	}
	// The old secret no longer opens the client agent's proxied routes.
	if code, body := reqNodeSecret(t, http.MethodGet, clURL+logsPath, strings.TrimSpace(string(old)), nil); code != http.StatusForbidden {
		t.Errorf("logs from the client agent with the old node secret: %d %.300s", code, body)
	}
	actions("after rotation")

	if err := c.AllocRestart(ctx, alloc.ID, "t"); err != nil {
		t.Fatalf("restart through the server: %v", err)
	}
	waittest.For(t, 30*time.Second, "the task restarted", func() (bool, string) {
		var a api.Allocation
		code, body := req(t, http.MethodGet, s.url+"/v1/allocation/"+alloc.ID, user, nil)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
			return false, body
		}
		ts := a.TaskStates["t"]
		if ts == nil {
			return false, "no task state"
		}
		return ts.Restarts >= 1 && ts.State == structs.TaskStateRunning, fmt.Sprintf("restarts %d, state %s", ts.Restarts, ts.State)
	})
}
