package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/gpulayer/gpulayer/structs"
)

// healthServer builds agent/testdata/healthserver into a directory a task
// running as nobody can reach, and returns its path.
func healthServer(t testing.TB) string {
	t.Helper()
	dir := taskUserDir(t)
	bin := filepath.Join(dir, "healthserver")
	cmd := exec.Command("go", "build", "-o", bin, "./agent/testdata/healthserver")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build healthserver: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Dynamic ports of the services tests' agents: above the kernel's
// ephemeral range (32768-60999 by default) and the test harness's agent
// ports (internal/porttest, below it), so a task never finds its port
// taken by another test's agent.
const (
	testMinDynamicPort = 61000
	testMaxDynamicPort = 61999
	// testReservedTop is the last of the ports the services agents
	// reserve from the bottom of that range.
	testReservedTop = 61899
)

// startServicesAgent starts agent -dev with the test dynamic port range.
func startServicesAgent(t *testing.T, dataDir string) *devAgent {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "ports.hcl")
	// The first 900 ports of the range are reserved: instances must get
	// ports above them.
	body := fmt.Sprintf("client {\n  min_dynamic_port = %d\n  max_dynamic_port = %d\n  reserved_ports = \"%d-%d\"\n}\n",
		testMinDynamicPort, testMaxDynamicPort, testMinDynamicPort, testReservedTop)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return startDevAgent(t, dataDir, "-config="+conf)
}

// serviceJobHCL is a service job of count allocations of the health
// server, registering service "web" on dynamic port "http" with an http
// check of /health.
func serviceJobHCL(bin string, count int, version string) string {
	return fmt.Sprintf(`job "web" {
  type = "service"
  group "api" {
    count = %d
    network {
      port "http" {}
    }
    service {
      name     = "web"
      port     = "http"
      tags     = ["%s"]
      provider = "gpulayer"
      check {
        type     = "http"
        path     = "/health"
        interval = "200ms"
        timeout  = "1s"
      }
    }
    task "server" {
      driver = "native"
      config {
        command = %q
      }
      env {
        VERSION = %q
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, count, version, bin, version)
}

func (a *devAgent) services(name string) []*api.ServiceRegistration {
	a.t.Helper()
	var regs []*api.ServiceRegistration
	if code := a.getJSON("/v1/service/"+name, &regs); code != 200 {
		a.t.Fatalf("GET /v1/service/%s: %d", name, code)
	}
	return regs
}

// TestE2EServicesRegisterHealthyInstances: on agent -dev a service job at
// count 3 with an http check registers 3 instances on distinct dynamic
// ports, each answering at its registered address; an instance whose check
// fails is deregistered and comes back when it passes again; the Service
// topic carries both; stopping the job removes every registration.
func TestE2EServicesRegisterHealthyInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	bin := healthServer(t)
	dataDir := taskUserDir(t)
	a := startServicesAgent(t, dataDir)
	jobFile := filepath.Join(t.TempDir(), "web.hcl")
	if err := os.WriteFile(jobFile, []byte(serviceJobHCL(bin, 3, "v1")), 0o600); err != nil {
		t.Fatal(err)
	}

	// Read the Service topic from the start.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan string, 256)
	go streamServiceEvents(ctx, a.addr, events)

	if out, code := a.cli("job", "run", "-detach", jobFile); code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	var regs []*api.ServiceRegistration
	waittest.For(t, 60*time.Second, "3 healthy instances of web", func() (bool, string) {
		regs = a.services("web")
		return len(regs) == 3, fmt.Sprintf("%d registered", len(regs))
	})
	ports := map[int]bool{}
	allocs := map[string]bool{}
	for _, r := range regs {
		if r.Address != "127.0.0.1" || r.Port <= testReservedTop || r.Port > testMaxDynamicPort ||
			r.JobID != "web" || r.Namespace != "default" || len(r.Tags) != 1 || r.Tags[0] != "v1" || r.NodeID == "" {
			t.Fatalf("registration %+v", r)
		}
		if ports[r.Port] || allocs[r.AllocID] {
			t.Fatalf("port or allocation registered twice: %+v", regs)
		}
		ports[r.Port], allocs[r.AllocID] = true, true
		body := httpGet(t, fmt.Sprintf("http://%s:%d/", r.Address, r.Port))
		if strings.TrimSpace(body) != "v1" {
			t.Fatalf("instance %s:%d answered %q", r.Address, r.Port, body)
		}
	}
	// The allocation carries its port and the task saw it.
	var alloc api.Allocation
	a.getJSON("/v1/allocation/"+regs[0].AllocID, &alloc)
	if sh := alloc.AllocatedResources.Shared; sh == nil || len(sh.Ports) != 1 || sh.Ports[0].Label != "http" || sh.Ports[0].Value != regs[0].Port {
		t.Fatalf("allocation ports %+v, registration port %d", alloc.AllocatedResources.Shared, regs[0].Port)
	}

	// The CLI.
	if out, code := a.cli("alloc", "status", regs[0].AllocID); code != 0 || !strings.Contains(out, "Allocation Addresses") ||
		!strings.Contains(out, fmt.Sprintf("127.0.0.1:%d", regs[0].Port)) {
		t.Fatalf("alloc status exited %d:\n%s", code, out)
	}
	if page := httpGet(t, a.addr+"/ui/allocation/"+regs[0].AllocID); !strings.Contains(page, `id="alloc-ports"`) ||
		!strings.Contains(page, fmt.Sprintf("127.0.0.1:%d", regs[0].Port)) {
		t.Fatalf("allocation page lacks its ports:\n%.2000s", page)
	}
	if out, code := a.cli("service", "list"); code != 0 || !strings.Contains(out, "web") || !strings.Contains(out, "[v1]") {
		t.Fatalf("service list exited %d:\n%s", code, out)
	}
	out, code := a.cli("service", "info", "web")
	if code != 0 || strings.Count(out, "127.0.0.1:") != 3 {
		t.Fatalf("service info exited %d:\n%s", code, out)
	}

	// One instance's check fails: it is deregistered, the others stay.
	sick := regs[0]
	flag := filepath.Join(dataDir, "client", "allocs", sick.AllocID, "server", "unhealthy")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 30*time.Second, "the failing instance deregistered", func() (bool, string) {
		regs = a.services("web")
		for _, r := range regs {
			if r.AllocID == sick.AllocID {
				return false, fmt.Sprintf("%d registered, the failing one among them", len(regs))
			}
		}
		return len(regs) == 2, fmt.Sprintf("%d registered", len(regs))
	})
	var checks map[string]*api.CheckQueryResult
	if code := a.getJSON("/v1/client/allocation/"+sick.AllocID+"/checks", &checks); code != 200 || len(checks) != 1 {
		t.Fatalf("checks: %d %+v", code, checks)
	}
	for _, c := range checks {
		if c.Status != structs.CheckFailure || c.Service != "web" || c.Group != "api" || !strings.Contains(c.Output, "500") {
			t.Fatalf("check result %+v", c)
		}
	}
	// It passes again: registered again.
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 30*time.Second, "the instance registered again", func() (bool, string) {
		regs = a.services("web")
		return len(regs) == 3, fmt.Sprintf("%d registered", len(regs))
	})

	// Stopping the job removes every registration.
	if out, code := a.cli("job", "stop", "web"); code != 0 {
		t.Fatalf("job stop exited %d:\n%s", code, out)
	}
	waittest.For(t, 60*time.Second, "no instance of web", func() (bool, string) {
		regs = a.services("web")
		return len(regs) == 0, fmt.Sprintf("%d registered", len(regs))
	})
	var stubs []*api.ServiceRegistrationListStub
	a.getJSON("/v1/services", &stubs)
	if len(stubs) != 0 {
		t.Fatalf("services after stop: %+v", stubs)
	}

	// The Service topic saw registrations and deregistrations.
	var seen []string
	waittest.For(t, 10*time.Second, "service events", func() (bool, string) {
		for {
			select {
			case e := <-events:
				seen = append(seen, e)
				continue
			default:
			}
			break
		}
		reg, dereg := 0, 0
		for _, e := range seen {
			switch e {
			case structs.EventServiceRegistration:
				reg++
			case structs.EventServiceDeregistration:
				dereg++
			}
		}
		return reg >= 4 && dereg >= 4, fmt.Sprintf("%d registrations, %d deregistrations", reg, dereg)
	})
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// streamServiceEvents sends the Type of every event on the Service topic
// to out until ctx ends.
func streamServiceEvents(ctx context.Context, addr string, out chan<- string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/event/stream?topic=Service&index=1", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var batch struct {
			Events []struct{ Topic, Type string }
		}
		if json.Unmarshal(sc.Bytes(), &batch) != nil {
			continue
		}
		for _, e := range batch.Events {
			if e.Topic == structs.TopicService {
				select {
				case out <- e.Type:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// TestE2EModelServerExample runs examples/model-server.hcl on agent -dev:
// both instances become healthy and registered, each on its own GPU, and
// answer at their registered address. It needs python3 (the stand-in
// server).
func TestE2EModelServerExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the example's stand-in server needs python3")
	}
	a := startServicesAgent(t, taskUserDir(t))
	if out, code := a.cli("job", "run", "-detach", "examples/model-server.hcl"); code != 0 {
		t.Fatalf("job run exited %d:\n%s", code, out)
	}
	var regs []*api.ServiceRegistration
	waittest.For(t, 60*time.Second, "2 healthy instances of model", func() (bool, string) {
		regs = a.services("model")
		return len(regs) == 2, fmt.Sprintf("%d registered", len(regs))
	})
	gpus := map[string]bool{}
	for _, r := range regs {
		var models struct {
			Data []struct {
				ID   string
				GPUs string `json:"gpus"`
			}
		}
		if err := json.Unmarshal([]byte(httpGet(t, fmt.Sprintf("http://%s:%d/v1/models", r.Address, r.Port))), &models); err != nil || len(models.Data) != 1 {
			t.Fatalf("instance %s:%d: %v %+v", r.Address, r.Port, err, models)
		}
		g := models.Data[0].GPUs
		if g == "" || gpus[g] {
			t.Fatalf("instances' GPUs: %q after %v", g, gpus)
		}
		gpus[g] = true
	}
}

// TestClusterServicesThroughServers: with a server agent and a client-only
// agent (ACLs on), the client registers its healthy instances over HTTP
// with its node secret, a server lists them, and a server proxies the
// check results of an allocation to the client's agent.
func TestClusterServicesThroughServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real agents")
	}
	bin := healthServer(t)
	c := startCluster(t, 1, 1, 0)
	job, err := jobspec.Parse("web.hcl", []byte(serviceJobHCL(bin, 2, "v1")), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := c.servers[0]
	if code, body := c.send(srv, http.MethodPut, "/v1/jobs", map[string]interface{}{"Job": job}, nil); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	var regs []*api.ServiceRegistration
	waittest.For(t, 60*time.Second, "2 healthy instances of web", func() (bool, string) {
		if err := c.get(srv, "/v1/service/web", &regs); err != nil {
			return false, err.Error()
		}
		return len(regs) == 2, fmt.Sprintf("%d registered", len(regs))
	})
	for _, r := range regs {
		if r.Port < testMinDynamicPort || r.Port > testMaxDynamicPort || r.Address != "127.0.0.1" {
			t.Fatalf("registration %+v", r)
		}
		var checks map[string]*api.CheckQueryResult
		if err := c.get(srv, "/v1/client/allocation/"+r.AllocID+"/checks", &checks); err != nil || len(checks) != 1 {
			t.Fatalf("checks through the server: %v %+v", err, checks)
		}
		for _, ch := range checks {
			if ch.Status != structs.CheckSuccess {
				t.Fatalf("check %+v", ch)
			}
		}
	}
	if code, body := c.send(srv, http.MethodDelete, "/v1/job/web", nil, nil); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	waittest.For(t, 60*time.Second, "no instance of web", func() (bool, string) {
		if err := c.get(srv, "/v1/service/web", &regs); err != nil {
			return false, err.Error()
		}
		return len(regs) == 0, fmt.Sprintf("%d registered", len(regs))
	})
}
