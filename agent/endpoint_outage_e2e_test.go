package agent_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// TestClusterClientRestartWithoutServersServesEndpoint (issue 14,
// "serving survives the control plane"): the server is killed, then the
// client agent is killed with -9 and started again while the server is
// still down. The restarted client starts anyway, reattaches the member
// processes (same pids) and its router answers; once the server is back
// the client registers again and the allocations stay running, none
// replaced or started again.
func TestClusterClientRestartWithoutServersServesEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real agents")
	}
	bin := modelServer(t, taskUserDir(t), "a")
	c := startCluster(t, 1, 1, 0)
	epPort := freePort(t)
	job, err := jobspec.Parse("ep.hcl", []byte(endpointJobHCL(bin, 2, epPort)), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, cl := c.servers[0], c.clients[0]
	if code, body := c.send(srv, http.MethodPut, "/v1/jobs", map[string]interface{}{"Job": job}, nil); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	pids := func() (map[string]int, string) {
		var eps []*api.ClientEndpoint
		if err := c.get(cl, "/v1/client/endpoints", &eps); err != nil {
			return nil, err.Error()
		}
		out := map[string]int{}
		for _, e := range eps {
			for _, m := range e.Members {
				if m.Admitted && len(m.Processes) == 1 && m.Processes[0].Alive {
					out[m.AllocID] = m.Processes[0].PID
				}
			}
		}
		return out, fmt.Sprint(out)
	}
	var before map[string]int
	waittest.For(t, 90*time.Second, "2 admitted members with live processes", func() (bool, string) {
		var d string
		before, d = pids()
		return len(before) == 2, d
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", epPort)
	hc := &http.Client{Timeout: 5 * time.Second}
	if _, err := askEndpoint(hc, url, "before"); err != nil {
		t.Fatal(err)
	}

	srv.kill()
	cl.kill()
	cl.start()
	served := map[string]bool{}
	waittest.For(t, 90*time.Second, "the router back with the server down, both members serving", func() (bool, string) {
		m, err := askEndpoint(hc, url, "outage")
		if err != nil {
			return false, err.Error()
		}
		served[m] = true
		return len(served) == 2, fmt.Sprint(served)
	})
	// The client's API resolves ACL tokens through the servers, so it
	// cannot list its members now: the processes are checked directly,
	// and by the router's listing once the server is back.
	for id, pid := range before {
		if processGone(pid) {
			t.Fatalf("member %s: pid %d gone after the restart without servers: want it reattached", id, pid)
		}
	}
	waittest.For(t, 30*time.Second, "the client's log says it serves from local state", func() (bool, string) {
		return strings.Contains(cl.logText(), "serving from local state"), "no such line"
	})

	srv.start()
	waittest.For(t, 90*time.Second, "the client registered again, the job's 2 allocations running", func() (bool, string) {
		var allocs []*api.Allocation
		if err := c.get(srv, "/v1/job/"+job.ID+"/allocations", &allocs); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusRunning {
				running++
			}
		}
		return len(allocs) == 2 && running == 2, fmt.Sprintf("%d allocations, %d running", len(allocs), running)
	})
	if _, err := askEndpoint(hc, url, "after"); err != nil {
		t.Fatal(err)
	}
	final, d := pids()
	for id, pid := range before {
		if final[id] != pid {
			t.Fatalf("member %s: pid %d before, %s once the server is back: want it reattached and kept", id, pid, d)
		}
	}
}
