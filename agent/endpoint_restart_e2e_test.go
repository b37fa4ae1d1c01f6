package agent_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// TestClusterEndpointRouterBackAfterClientKill9 (issue 14, hostile
// review): kill -9 of the client agent while its router serves frees the
// endpoint's port with the process; the members run on; the restarted
// agent reattaches them and runs the router again on the same port, with
// the same member processes (not restarted) admitted.
func TestClusterEndpointRouterBackAfterClientKill9(t *testing.T) {
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
	// pids reads the member processes from the client's router: alloc
	// ID -> pid, for admitted members whose process lives.
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
	cl.kill()
	// The port went with the process: another listener may bind it.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", epPort))
	if err != nil {
		t.Fatalf("endpoint port held after kill -9 of the agent: %v", err)
	}
	_ = ln.Close()
	cl.start()
	served := map[string]bool{}
	waittest.For(t, 90*time.Second, "the router back, both members serving", func() (bool, string) {
		m, err := askEndpoint(hc, url, "after")
		if err != nil {
			return false, err.Error()
		}
		served[m] = true
		return len(served) == 2, fmt.Sprint(served)
	})
	after, d := pids()
	for id, pid := range before {
		if after[id] != pid {
			t.Fatalf("member %s: pid %d before the kill, %s after: want it reattached, not restarted", id, pid, d)
		}
	}
	if strings.Contains(cl.logText(), "panic:") {
		t.Fatalf("agent panicked:\n%s", cl.logText())
	}
}
