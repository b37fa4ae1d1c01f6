package agent_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// memberHeader is the response header the endpoint router names the
// serving member's allocation in (agent/client/endpoint.MemberHeader).
const memberHeader = "X-Gpulayer-Endpoint-Member"

// endpointOutageEnv sets how long TestClusterEndpointServesWithoutServers
// keeps asking after the server is killed, in seconds: the 60 s
// proof with GPULAYER_ENDPOINT_OUTAGE_SECONDS=60; 5 s by default.
const endpointOutageEnv = "GPULAYER_ENDPOINT_OUTAGE_SECONDS"

// modelServer builds agent/testdata/modelserver with main.build = build
// into dir (reachable by the task user) and returns its path.
func modelServer(t testing.TB, dir, build string) string {
	t.Helper()
	bin := filepath.Join(dir, "modelserver-"+build)
	cmd := exec.Command("go", "build", "-ldflags", "-X main.build="+build, "-o", bin, "./agent/testdata/modelserver")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build modelserver: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// endpointJobHCL is a service job "ep" of count members of bin serving
// model "m1" behind endpoint "llm-e2e" on epPort, each on its dynamic
// port "http" with an http check; a killed member restarts after 1 s.
func endpointJobHCL(bin string, count, epPort int) string {
	return fmt.Sprintf(`job "ep" {
  type = "service"
  group "llm" {
    count = %d
    network {
      port "http" {}
    }
    endpoint {
      name  = "llm-e2e"
      port  = %d
      model = "m1"
    }
    restart {
      attempts = 10
      interval = "10m"
      delay    = "1s"
      mode     = "fail"
    }
    service {
      name     = "llm-e2e-member"
      port     = "http"
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
        MODEL = "m1"
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, count, epPort, bin)
}

// endpointAllocs returns the job's allocations (full reads) in index order.
func (a *devAgent) endpointAllocs(jobID string) []*api.Allocation {
	a.t.Helper()
	var stubs []*api.Allocation
	if code := a.getJSON("/v1/job/"+jobID+"/allocations", &stubs); code != 200 {
		a.t.Fatalf("job allocations: %d", code)
	}
	var out []*api.Allocation
	for _, s := range stubs {
		var full api.Allocation
		if code := a.getJSON("/v1/allocation/"+s.ID, &full); code != 200 {
			a.t.Fatalf("allocation %s: %d", s.ID, code)
		}
		out = append(out, &full)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// memberPIDs reads the members' task pids from GET /v1/client/endpoints.
func (a *devAgent) memberPIDs() map[string]int {
	a.t.Helper()
	var eps []*api.ClientEndpoint
	if code := a.getJSON("/v1/client/endpoints", &eps); code != 200 {
		a.t.Fatalf("GET /v1/client/endpoints: %d", code)
	}
	out := map[string]int{}
	for _, e := range eps {
		for _, m := range e.Members {
			for _, p := range m.Processes {
				if p.Alive && p.PID > 0 {
					out[m.AllocID] = p.PID
				}
			}
		}
	}
	return out
}

// askEndpoint sends one request through the router and returns the
// member that served it.
func askEndpoint(hc *http.Client, url, reqID string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Request-Id", reqID)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	m := resp.Header.Get(memberHeader)
	if m == "" || !strings.Contains(string(body), m) {
		return "", fmt.Errorf("member header %q, body %s", m, body)
	}
	return m, nil
}

// memberAddr is the host:port member al serves on (its "http" port).
func memberAddr(t *testing.T, al *api.Allocation) string {
	t.Helper()
	if al.AllocatedResources != nil && al.AllocatedResources.Shared != nil {
		for _, p := range al.AllocatedResources.Shared.Ports {
			if p.Label == "http" {
				host := p.HostIP
				if host == "" {
					host = "127.0.0.1"
				}
				return net.JoinHostPort(host, strconv.Itoa(p.Value))
			}
		}
	}
	t.Fatalf("allocation %s has no http port", al.ID)
	return ""
}

// waitPortRefused waits until a TCP connection to addr is refused.
func waitPortRefused(t *testing.T, addr string) {
	t.Helper()
	waittest.For(t, 10*time.Second, addr+" refuses connections", func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true, ""
		}
		_ = c.Close()
		return false, "still accepts"
	})
}

// liveAllocs returns the allocations the client has not finished.
func liveAllocs(allocs []*api.Allocation) []*api.Allocation {
	var out []*api.Allocation
	for _, al := range allocs {
		if !al.ClientTerminalStatus() {
			out = append(out, al)
		}
	}
	return out
}

// describeAllocs summarises each allocation for a failure message: name,
// client status, endpoint admission and the last event of each task.
func describeAllocs(allocs []*api.Allocation) string {
	var b strings.Builder
	for _, al := range allocs {
		fmt.Fprintf(&b, "\n  %s %s", al.Name, al.ClientStatus)
		if em := al.EndpointMember; em != nil {
			fmt.Fprintf(&b, " admitted=%v %s", em.Admitted, em.Reason)
		}
		for name, ts := range al.TaskStates {
			if ts != nil && len(ts.Events) > 0 {
				ev := ts.Events[len(ts.Events)-1]
				fmt.Fprintf(&b, " [%s: %s %s exit %d]", name, ev.Type, ev.DisplayMessage, ev.ExitCode)
			}
		}
	}
	return b.String()
}

func admittedCount(allocs []*api.Allocation) int {
	n := 0
	for _, al := range allocs {
		if al.EndpointMember != nil && al.EndpointMember.Admitted {
			n++
		}
	}
	return n
}

// killMember SIGKILLs the member's task process and waits until it has
// exited (gone, or a zombie: its sockets are closed), so the next request
// comes after the death, not during it.
func killMember(t *testing.T, pid int) {
	t.Helper()
	if pid <= 1 {
		t.Fatalf("bad member pid %d", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill member pid %d: %v", pid, err)
	}
	waittest.For(t, 10*time.Second, fmt.Sprintf("pid %d exited", pid), func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, ""
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return false, string(b)
		}
		st := b[i+2]
		return st == 'Z' || st == 'X', "state " + string(st)
	})
}

// TestE2EEndpointNativeMembers is the must-show 1 and 2 on agent
// -dev with 3 native members of one endpoint: 1,000 requests spread
// 334/333/333 in round-robin order; a member killed between requests is
// skipped with no failed request; a member killed in the middle of a slow
// streaming request fails that request only, and the request logs show
// no other member got it; a member serving another model and one started
// from another binary are never admitted, with the reasons on their
// allocations (API and alloc status); stopping the job reports each
// member stopped once its process is gone, and the router's port closes.
func TestE2EEndpointNativeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	binDir := taskUserDir(t)
	binA := modelServer(t, binDir, "a")
	binB := modelServer(t, binDir, "b")
	// The job runs the binary at one path; the test swaps what is there.
	bin := filepath.Join(binDir, "modelserver")
	copyFile(t, binA, bin)
	dataDir := taskUserDir(t)
	a := startServicesAgent(t, dataDir)
	epPort := freePort(t)
	jobFile := filepath.Join(t.TempDir(), "ep.hcl")
	if err := os.WriteFile(jobFile, []byte(endpointJobHCL(bin, 3, epPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", jobFile); code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	var allocs []*api.Allocation
	// Live members only: a member that failed under load and was
	// replaced is not one of the three (its story is in the message).
	waittest.For(t, 60*time.Second, "3 admitted members", func() (bool, string) {
		all := a.endpointAllocs("ep")
		allocs = liveAllocs(all)
		return len(allocs) == 3 && admittedCount(allocs) == 3, fmt.Sprintf("%d live of %d allocations, %d admitted: %s", len(allocs), len(all), admittedCount(allocs), describeAllocs(all))
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", epPort)
	hc := &http.Client{Timeout: 10 * time.Second}

	// 1,000 requests: strict round robin over the 3 members.
	seq := make([]string, 0, 1000)
	for i := 0; i < 1000; i++ {
		m, err := askEndpoint(hc, url, fmt.Sprintf("rr-%d", i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		seq = append(seq, m)
	}
	counts := map[string]int{}
	for i, m := range seq {
		counts[m]++
		if i >= 3 && m != seq[i%3] {
			t.Fatalf("request %d went to %s, want %s (round robin of %v)", i, m, seq[i%3], seq[:3])
		}
	}
	var spread []int
	for _, n := range counts {
		spread = append(spread, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(spread)))
	if fmt.Sprint(spread) != "[334 333 333]" || len(counts) != 3 {
		t.Fatalf("1,000 requests spread %v over %d members, want [334 333 333]", spread, len(counts))
	}
	t.Logf("1,000 requests: %v", counts)

	// A member killed between requests is skipped: no request fails.
	pids := a.memberPIDs()
	victim := allocs[1].ID
	killMember(t, pids[victim])
	// "Between requests" means after the death is visible on the
	// network: on a loaded machine the kernel may not yet have delivered
	// the dead member's FIN to the router's kept-alive connection when
	// its process is already reaped, and a request written into that
	// connection is (rightly) never replayed. Once a new connection to
	// the member's port is refused, its old connections are closed too.
	waitPortRefused(t, memberAddr(t, allocs[1]))
	for i := 0; i < 60; i++ {
		if _, err := askEndpoint(hc, url, fmt.Sprintf("after-kill-%d", i)); err != nil {
			t.Fatalf("request %d after a member was killed: %v", i, err)
		}
	}
	waittest.For(t, 60*time.Second, "the killed member back and admitted", func() (bool, string) {
		allocs = a.endpointAllocs("ep")
		pids = a.memberPIDs()
		return admittedCount(allocs) == 3 && len(pids) == 3, fmt.Sprintf("%d admitted, pids %v", admittedCount(allocs), pids)
	})

	// A member killed in the middle of a slow streaming request fails
	// that request only; no other member ever sees it.
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/v1/slow?chunks=200&interval_ms=50", epPort), nil)
	req.Header.Set("X-Request-Id", "slow-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	streamer := resp.Header.Get(memberHeader)
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: 0 ") {
		t.Fatalf("first event %q: %v", line, err)
	}
	killMember(t, pids[streamer])
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("the stream of a killed member ended cleanly after %d more bytes", len(rest))
	}
	t.Logf("slow request cut when its member was killed: %v", err)
	for i := 0; i < 30; i++ {
		if _, err := askEndpoint(hc, url, fmt.Sprintf("after-stream-kill-%d", i)); err != nil {
			t.Fatalf("request %d after the streaming member was killed: %v", i, err)
		}
	}
	for _, al := range allocs {
		log, err := os.ReadFile(filepath.Join(dataDir, "client", "allocs", al.ID, "server", "requests.log"))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Count(string(log), "slow-1 ")
		want := 0
		if al.ID == streamer {
			want = 1
		}
		if got != want {
			t.Fatalf("member %s logged the slow request %d times, want %d", al.ID[:8], got, want)
		}
	}
	waittest.For(t, 60*time.Second, "the streaming member back and admitted", func() (bool, string) {
		allocs = a.endpointAllocs("ep")
		pids = a.memberPIDs()
		return admittedCount(allocs) == 3 && len(pids) == 3, fmt.Sprintf("%d admitted", admittedCount(allocs))
	})

	// Member 1 restarts serving another model, then member 2 from another
	// binary: neither is admitted, and their allocations say why. (Member
	// 0 keeps the reference identity: the lowest index breaks ties.)
	other, swapped, keeper := allocs[1], allocs[2], allocs[0]
	if err := os.WriteFile(filepath.Join(dataDir, "client", "allocs", other.ID, "server", "model"), []byte("other-model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	killMember(t, pids[other.ID])
	refusedWith := func(id, word string) *api.Allocation {
		var got *api.Allocation
		waittest.For(t, 60*time.Second, "member "+id[:8]+" refused ("+word+")", func() (bool, string) {
			var al api.Allocation
			a.getJSON("/v1/allocation/"+id, &al)
			got = &al
			em := al.EndpointMember
			return em != nil && !em.Admitted && strings.Contains(em.Reason, word) && a.memberPIDs()[id] > 0, fmt.Sprintf("%+v", em)
		})
		return got
	}
	got := refusedWith(other.ID, "not listed")
	t.Logf("member serving another model: %s", got.EndpointMember.Reason)
	tmp := bin + ".new"
	copyFile(t, binB, tmp)
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	killMember(t, pids[swapped.ID])
	got = refusedWith(swapped.ID, "digest")
	t.Logf("member from another binary: %s", got.EndpointMember.Reason)
	for i := 0; i < 30; i++ {
		m, err := askEndpoint(hc, url, fmt.Sprintf("refused-%d", i))
		if err != nil || m != keeper.ID {
			t.Fatalf("request %d went to %s (%v), want only %s", i, m, err, keeper.ID)
		}
	}
	for _, id := range []string{other.ID, swapped.ID} {
		var al api.Allocation
		a.getJSON("/v1/allocation/"+id, &al)
		if al.EndpointMember == nil || al.EndpointMember.Admitted {
			t.Fatalf("member %s admitted after its refusal: %+v", id[:8], al.EndpointMember)
		}
	}
	out, code := a.cli("alloc", "status", swapped.ID)
	if code != 0 || !strings.Contains(out, "Endpoint") || !strings.Contains(out, "not admitted") || !strings.Contains(out, "digest") {
		t.Fatalf("alloc status exited %d:\n%s", code, out)
	}

	// Stop: each member reported stopped once its process is gone; the
	// router's port closes.
	pids = a.memberPIDs()
	if out, code := a.cli("job", "stop", "ep"); code != 0 {
		t.Fatalf("job stop exited %d:\n%s", code, out)
	}
	waittest.For(t, 60*time.Second, "every member stopped", func() (bool, string) {
		allocs = a.endpointAllocs("ep")
		done := 0
		for _, al := range allocs {
			if al.ClientStatus == "complete" && al.EndpointMember != nil && strings.HasPrefix(al.EndpointMember.Reason, "stopped: every member process is gone") {
				done++
			}
		}
		return done == 3, fmt.Sprintf("%d of %d stopped", done, len(allocs))
	})
	for id, pid := range pids {
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("member %s reported stopped, its process group %d: %v", id[:8], pid, err)
		}
	}
	waittest.For(t, 30*time.Second, "the router's port closed", func() (bool, string) {
		_, err := askEndpoint(hc, url, "after-stop")
		return err != nil, fmt.Sprint(err)
	})
}

// copyFile copies src to dst (mode 0755).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestClusterEndpointServesWithoutServers is the must-show 3: a
// client-only agent runs the endpoint's router for its 2 members; the
// only server is then killed, and every request sent for the outage
// (GPULAYER_ENDPOINT_OUTAGE_SECONDS, 5 s by default, 60 s for the issue's
// proof) is answered, by both members in turn.
func TestClusterEndpointServesWithoutServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real agents")
	}
	outage := 5 * time.Second
	if v := os.Getenv(endpointOutageEnv); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s <= 0 || s > 3600 {
			t.Fatalf("%s=%q: want seconds, 1-3600", endpointOutageEnv, v)
		}
		outage = time.Duration(s) * time.Second
	}
	bin := modelServer(t, taskUserDir(t), "a")
	c := startCluster(t, 1, 1, 0)
	epPort := freePort(t)
	job, err := jobspec.Parse("ep.hcl", []byte(endpointJobHCL(bin, 2, epPort)), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := c.servers[0]
	if code, body := c.send(srv, http.MethodPut, "/v1/jobs", map[string]interface{}{"Job": job}, nil); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	waittest.For(t, 60*time.Second, "2 admitted members, as the server reads them", func() (bool, string) {
		var stubs []*api.Allocation
		if err := c.get(srv, "/v1/job/ep/allocations", &stubs); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, s := range stubs {
			var al api.Allocation
			if err := c.get(srv, "/v1/allocation/"+s.ID, &al); err == nil && al.EndpointMember != nil && al.EndpointMember.Admitted {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d of %d admitted", n, len(stubs))
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", epPort)
	hc := &http.Client{Timeout: 5 * time.Second}
	if _, err := askEndpoint(hc, url, "before"); err != nil {
		t.Fatal(err)
	}
	srv.kill()
	served := map[string]int{}
	n := 0
	for end := time.Now().Add(outage); time.Now().Before(end); n++ {
		m, err := askEndpoint(hc, url, fmt.Sprintf("outage-%d", n))
		if err != nil {
			t.Fatalf("request %d, %s into the outage: %v", n, time.Until(end).Round(time.Second), err)
		}
		served[m]++
		time.Sleep(20 * time.Millisecond)
	}
	if len(served) != 2 {
		t.Fatalf("%d requests in the outage went to %v, want both members", n, served)
	}
	t.Logf("server killed: %d requests over %s all answered, by %v", n, outage, served)
}
