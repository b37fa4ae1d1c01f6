package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// TestAllocActionsOnClientOnlyAgent: signal, exec and restart of an
// allocation on a client-only agent, sent to the server, which proxies
// them to that agent. They answered 404 "no route" before: a client-only
// agent registered only its log route.
func TestAllocActionsOnClientOnlyAgent(t *testing.T) {
	scfg := agent.DefaultConfig()
	scfg.Name = "srv-actions"
	scfg.Server.Enabled = true
	srv := startAgent(t, scfg)
	srvURL := "http://" + srv.HTTPAddr()

	ccfg := agent.DefaultConfig()
	ccfg.Name = "gpu-host-actions"
	ccfg.Client.Enabled = true
	ccfg.Client.Servers = []string{srv.HTTPAddr()}
	cl := startAgent(t, ccfg)

	job := map[string]interface{}{
		"ID": "actions", "Type": "service",
		"TaskGroups": []interface{}{map[string]interface{}{
			"Name": "g", "Count": 1,
			"Tasks": []interface{}{map[string]interface{}{
				"Name": "t", "Driver": "native",
				"Config": map[string]interface{}{"command": "/bin/sh", "args": []string{"-c",
					`trap 'echo got-hup' HUP; echo started; while true; do sleep 0.1; done`}},
				"Resources": map[string]interface{}{"CPU": 100, "MemoryMB": 32},
			}},
		}},
	}
	if code, body := putJSON(t, srvURL+"/v1/jobs", map[string]interface{}{"Job": job}, ""); code != 200 {
		t.Fatalf("PUT /v1/jobs: %d %s", code, body)
	}
	var alloc *api.Allocation
	waittest.For(t, 30*time.Second, "the allocation running", func() (bool, string) {
		var allocs []*api.Allocation
		if err := getJSON(srvURL+"/v1/job/actions/allocations", &allocs); err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusRunning {
				alloc = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocs", len(allocs))
	})
	logs := func() string {
		resp, err := http.Get(srvURL + "/v1/client/fs/logs/" + alloc.ID + "?task=t&type=stdout&plain=true")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waittest.Until(t, 20*time.Second, "the task started", func() bool { return strings.Contains(logs(), "started") })

	c, err := api.NewClient(&api.Config{Address: srvURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var stdout, stderr bytes.Buffer
	code, err := c.AllocExec(ctx, alloc.ID, "t", []string{"/bin/sh", "-c", "echo exec-ran-as-$(id -u); exit 3"}, false, nil, &stdout, &stderr)
	if err != nil || code != 3 || !strings.Contains(stdout.String(), "exec-ran-as-") {
		t.Fatalf("exec through the server: code %d, err %v, stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}

	if err := c.AllocSignal(ctx, alloc.ID, "t", "SIGHUP"); err != nil {
		t.Fatalf("signal through the server: %v", err)
	}
	waittest.Until(t, 20*time.Second, "the task caught SIGHUP", func() bool { return strings.Contains(logs(), "got-hup") })

	if err := c.AllocRestart(ctx, alloc.ID, "t"); err != nil {
		t.Fatalf("restart through the server: %v", err)
	}
	waittest.For(t, 30*time.Second, "the task restarted", func() (bool, string) {
		var a api.Allocation
		if err := getJSON(srvURL+"/v1/allocation/"+alloc.ID, &a); err != nil {
			return false, err.Error()
		}
		ts := a.TaskStates["t"]
		if ts == nil {
			return false, "no task state"
		}
		return ts.Restarts >= 1 && ts.State == structs.TaskStateRunning, fmt.Sprintf("restarts %d, state %s", ts.Restarts, ts.State)
	})

	// The client-only agent acts only on its own allocations.
	req, _ := http.NewRequest(http.MethodPost, "http://"+cl.HTTPAddr()+"/v1/allocation/00000000-0000-0000-0000-000000000000/signal",
		strings.NewReader(`{"Signal":"SIGHUP"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("signal of an unknown allocation on the client-only agent: %s, want 404", resp.Status)
	}
}
