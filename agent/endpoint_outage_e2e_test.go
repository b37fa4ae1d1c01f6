package agent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
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
	e := startEndpointCluster(t)
	c, srv, cl, url, hc, pids, before := e.c, e.srv, e.cl, e.url, e.hc, e.pids, e.before

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
		if err := c.get(srv, "/v1/job/"+e.jobID+"/allocations", &allocs); err != nil {
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
