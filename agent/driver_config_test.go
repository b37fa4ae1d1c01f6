package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
)

// startServerOnly runs an in-process server agent (no client) on loopback
// and returns its HTTP URL once it has a leader.
func startServerOnly(t *testing.T) string {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.Name = "srv"
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = taskUserDir(t)
	cfg.Server.Enabled = true
	// These tests check job validation, not tokens: ACLs off, said so.
	off := false
	cfg.ACL = &agent.ACLConfig{Enabled: &off}
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = freePort(t), freePort(t), freePort(t)
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	url := "http://" + a.HTTPAddr()
	waittest.For(t, 30*time.Second, "a leader", func() (bool, string) {
		resp, err := http.Get(url + "/v1/status/leader")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && len(bytes.Trim(b, "\" \n")) > 0, string(b)
	})
	return url
}

// TestSubmitChecksDriverConfig is the hostile-user trial's finding:
// native and docker task configs with a wrong kind, an unknown key or
// cpu_hard_limit without cpu are refused with 400 by PUT /v1/jobs and by
// the plan endpoint, naming the group, task and key in plain words, and
// nothing is registered. The drivers' validators reach the server only
// through the agent's imports, so this runs a real server agent.
func TestSubmitChecksDriverConfig(t *testing.T) {
	url := startServerOnly(t)
	body := func(id, driver string, config map[string]interface{}, resources map[string]interface{}) []byte {
		task := map[string]interface{}{"Name": "t", "Driver": driver, "Config": config}
		if resources != nil {
			task["Resources"] = resources
		}
		b, err := json.Marshal(map[string]interface{}{"Job": map[string]interface{}{
			"ID": id, "Type": "service",
			"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1, "Tasks": []interface{}{task}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send := func(t *testing.T, method, path string, b []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var e struct{ Error string }
		if resp.StatusCode != 200 {
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s %s: %d with a body that is not JSON: %s", method, path, resp.StatusCode, raw)
			}
			return resp.StatusCode, e.Error
		}
		return resp.StatusCode, string(raw)
	}
	// An explicit CPU of 0: a Resources object that leaves CPU out gets 100 MHz.
	noCPU := map[string]interface{}{"CPU": 0, "MemoryMB": 32}
	cases := []struct {
		name      string
		driver    string
		config    map[string]interface{}
		resources map[string]interface{}
		want      string
	}{
		{"cpu_hard_limit a string", "native", map[string]interface{}{"command": "/bin/true", "cpu_hard_limit": "yes"}, nil,
			`group "g": task "t": config: key "cpu_hard_limit" must be true or false, got a string "yes"`},
		{"unknown key", "native", map[string]interface{}{"command": "/bin/true", "comand": "x"}, nil,
			`group "g": task "t": config: unknown key "comand" (the native driver accepts command, args, user and cpu_hard_limit)`},
		{"args numbers", "native", map[string]interface{}{"command": "/bin/echo", "args": []interface{}{1, 2}}, nil,
			`group "g": task "t": config: key "args": element 0 must be a string, got a number 1`},
		{"cpu_hard_limit without cpu", "native", map[string]interface{}{"command": "/bin/true", "cpu_hard_limit": true}, noCPU,
			`group "g": task "t": config: key "cpu_hard_limit" is true but the task's resources set no cpu`},
		{"docker unknown key", "docker", map[string]interface{}{"image": "alpine", "imagee": "x"}, nil,
			`group "g": task "t": config: unknown key "imagee" (the docker driver accepts`},
		{"docker mount climbs out", "docker", map[string]interface{}{"image": "alpine", "mounts": []interface{}{map[string]interface{}{"source": "../../etc", "target": "/e"}}}, nil,
			`config: key "mounts": mount "../../etc" (element 0) is refused`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-%d", i)
			b := body(id, tc.driver, tc.config, tc.resources)
			for _, path := range []string{"/v1/jobs", "/v1/job/" + id + "/plan"} {
				code, msg := send(t, http.MethodPut, path, b)
				if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
					t.Errorf("PUT %s = %d %q, want 400 containing %q", path, code, msg, tc.want)
				}
				for _, goType := range []string{"float64", "interface", "string yes", "%!"} {
					if strings.Contains(msg, goType) {
						t.Errorf("PUT %s: message %q names a Go type (%q)", path, msg, goType)
					}
				}
			}
			if code, _ := send(t, http.MethodGet, "/v1/job/"+id, nil); code != http.StatusNotFound {
				t.Errorf("GET /v1/job/%s = %d after a refused register, want 404", id, code)
			}
		})
	}
	code, list := send(t, http.MethodGet, "/v1/jobs", nil)
	if code != 200 || strings.TrimSpace(list) != "[]" {
		t.Fatalf("GET /v1/jobs = %d %s, want no jobs", code, list)
	}
	// A good config is still accepted: the checks on the server are only
	// those that need no client (a command missing from the server's own
	// filesystem is not one of them).
	good := body("good", "native", map[string]interface{}{"command": "/no/such/binary/on/this/server", "cpu_hard_limit": true}, map[string]interface{}{"CPU": 500, "MemoryMB": 32})
	if code, msg := send(t, http.MethodPut, "/v1/jobs", good); code != 200 {
		t.Fatalf("PUT /v1/jobs with a good config = %d %s", code, msg)
	}
}
