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
	e := startEndpointCluster(t)
	cl, epPort, url, hc, pids, before := e.cl, e.epPort, e.url, e.hc, e.pids, e.before
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

// endpointCluster is a cluster of one server and one client agent (real
// processes) running the 2-member endpoint job of the model server, both
// members admitted and the endpoint answering.
type endpointCluster struct {
	c       *testCluster
	srv, cl *proc
	epPort  int
	url     string
	hc      *http.Client
	jobID   string
	// before is alloc ID -> pid of the admitted members once up.
	before map[string]int
}

// startEndpointCluster starts an endpointCluster and waits until both
// members are admitted with live processes and a request is answered.
func startEndpointCluster(t *testing.T) *endpointCluster {
	t.Helper()
	bin := modelServer(t, taskUserDir(t), "a")
	e := &endpointCluster{c: startCluster(t, 1, 1, 0), epPort: freePort(t), hc: &http.Client{Timeout: 5 * time.Second}}
	job, err := jobspec.Parse("ep.hcl", []byte(endpointJobHCL(bin, 2, e.epPort)), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.cl, e.jobID = e.c.servers[0], e.c.clients[0], job.ID
	if code, body := e.c.send(e.srv, http.MethodPut, "/v1/jobs", map[string]interface{}{"Job": job}, nil); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	waittest.For(t, 90*time.Second, "2 admitted members with live processes", func() (bool, string) {
		var d string
		e.before, d = e.pids()
		return len(e.before) == 2, d
	})
	e.url = fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", e.epPort)
	if _, err := askEndpoint(e.hc, e.url, "before"); err != nil {
		t.Fatal(err)
	}
	return e
}

// pids reads the member processes from the client's router: alloc ID ->
// pid, for admitted members whose process lives.
func (e *endpointCluster) pids() (map[string]int, string) {
	var eps []*api.ClientEndpoint
	if err := e.c.get(e.cl, "/v1/client/endpoints", &eps); err != nil {
		return nil, err.Error()
	}
	out := map[string]int{}
	for _, ep := range eps {
		for _, m := range ep.Members {
			if m.Admitted && len(m.Processes) == 1 && m.Processes[0].Alive {
				out[m.AllocID] = m.Processes[0].PID
			}
		}
	}
	return out, fmt.Sprint(out)
}
