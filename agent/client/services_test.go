package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// svcServer is a clienttest.Server that also takes service registrations.
type svcServer struct {
	*clienttest.Server
	mu   sync.Mutex
	regs map[string]*structs.ServiceRegistration
}

func (s *svcServer) NodeServices(ctx context.Context, nodeID string, req *structs.NodeServicesRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range req.Upsert {
		if r.NodeID != nodeID {
			return fmt.Errorf("registration of node %s sent by %s", r.NodeID, nodeID)
		}
		s.regs[r.ID] = r.Copy()
	}
	for _, id := range req.Delete {
		delete(s.regs, id)
	}
	for _, a := range req.DeleteAllocs {
		for id, r := range s.regs {
			if r.AllocID == a {
				delete(s.regs, id)
			}
		}
	}
	return nil
}

func (s *svcServer) registered() []*structs.ServiceRegistration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*structs.ServiceRegistration
	for _, r := range s.regs {
		out = append(out, r)
	}
	return out
}

// TestServiceScriptCheckAndPortEnv: a task sees its host port in
// NOMAD_PORT_<label> and GPULAYER_PORT_<label>; a script check runs inside
// the task (its directory) and decides whether the instance is
// registered; a task service without checks is registered while its task
// runs; ChecksHealthy follows the checks; stopping the allocation
// deregisters everything.
func TestServiceScriptCheckAndPortEnv(t *testing.T) {
	srv := &svcServer{Server: clienttest.NewServer(), regs: map[string]*structs.ServiceRegistration{}}
	c := newTestClient(t, srv.Server, "", func(cfg *Config) { cfg.Servers = srv })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh",
		[]string{"-c", "echo port=$NOMAD_PORT_http gl=$GPULAYER_PORT_http addr=$NOMAD_ADDR_http; exec sleep 60"}, nil)
	a.AllocatedResources.Shared = &structs.AllocatedSharedResources{Ports: []structs.AllocatedPortMapping{{Label: "http", Value: port, HostIP: "127.0.0.1"}}}
	tg := a.Job.TaskGroups[0]
	tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
	tg.Services = []*structs.Service{{Name: "scripted", PortLabel: "http", Checks: []*structs.ServiceCheck{{
		Type: structs.ServiceCheckScript, Command: "/bin/sh", Args: []string{"-c", "test -f healthy"}, TaskName: "main",
		Interval: 100 * time.Millisecond, Timeout: time.Second,
	}}}}
	tg.Tasks[0].Services = []*structs.Service{{Name: "plain", TaskName: "main"}}
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)

	byName := func() map[string]*structs.ServiceRegistration {
		out := map[string]*structs.ServiceRegistration{}
		for _, r := range srv.registered() {
			out[r.ServiceName] = r
		}
		return out
	}
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		got := byName()
		return got["plain"] != nil && got["scripted"] == nil, fmt.Sprintf("registered %v", got)
	})
	want := fmt.Sprintf("port=%d gl=%d addr=127.0.0.1:%d", port, port, port)
	clienttest.WaitFor(t, 5*time.Second, func() (bool, string) {
		out := readLogs(t, c, a.ID, "stdout")
		return strings.Contains(out, want), out
	})
	// Failing until the file exists in the task's directory.
	st, ok := c.AllocCheckStatuses(a.ID)
	if !ok || len(st) != 1 {
		t.Fatalf("check statuses %v %v", st, ok)
	}
	for _, s := range st {
		if s.Status != structs.CheckFailure || !strings.Contains(s.Output, "exit 1") {
			t.Fatalf("check status before the file: %+v", s)
		}
	}
	if healthy, known := c.ChecksHealthy(a.ID); healthy || !known {
		t.Fatalf("ChecksHealthy = %v %v before the file", healthy, known)
	}
	if err := os.WriteFile(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "main", "healthy"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		got := byName()
		return got["scripted"] != nil, fmt.Sprintf("registered %v", got)
	})
	if r := byName()["scripted"]; r.Port != port || r.Address != "127.0.0.1" || r.AllocID != a.ID || r.JobID != a.JobID {
		t.Fatalf("registration %+v", r)
	}
	if healthy, known := c.ChecksHealthy(a.ID); !healthy || !known {
		t.Fatalf("ChecksHealthy = %v %v after the file", healthy, known)
	}
	if healthy, known := c.ChecksHealthy("not-an-alloc-of-this-client"); healthy || known {
		t.Fatalf("ChecksHealthy of an unknown allocation = %v %v", healthy, known)
	}
	if err := srv.StopAlloc(a.ID); err != nil {
		t.Fatal(err)
	}
	srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	if got := srv.registered(); len(got) != 0 {
		t.Fatalf("registrations after stop: %+v", got)
	}
}

func TestHTTPAndTCPChecks(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			fmt.Fprint(w, strings.Repeat("x", 2*checkOutputLimit))
			return
		}
		http.Error(w, "nope", http.StatusServiceUnavailable)
	}))
	defer ok.Close()
	addr := strings.TrimPrefix(ok.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r := runHTTPCheck(ctx, addr, "/health"); !r.ok || r.code != 200 || len(r.output) > checkOutputLimit+100 {
		t.Fatalf("http check of /health: %+v (output %d bytes)", r.ok, len(r.output))
	}
	if r := runHTTPCheck(ctx, addr, "/other"); r.ok || r.code != 503 {
		t.Fatalf("http check of a 503: %+v", r)
	}
	if r := runTCPCheck(ctx, addr); !r.ok {
		t.Fatalf("tcp check of a listener: %+v", r)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	if r := runTCPCheck(ctx, closed); r.ok {
		t.Fatalf("tcp check of a closed port passed")
	}
	// A server that never answers: the timeout ends the check.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	start := time.Now()
	if r := runHTTPCheck(short, strings.TrimPrefix(slow.URL, "http://"), "/"); r.ok || time.Since(start) > 3*time.Second {
		t.Fatalf("slow http check: %+v after %s", r, time.Since(start))
	}
}

// fakeExecer runs nothing: it writes out and then waits for ctx when
// block is set.
type fakeExecer struct {
	out   string
	code  int
	block bool
}

func (f fakeExecer) ExecTask(ctx context.Context, taskID string, opts *driver.ExecOptions) (int, error) {
	_, _ = opts.Stdout.Write([]byte(f.out))
	if f.block {
		<-ctx.Done()
		return -1, ctx.Err()
	}
	return f.code, nil
}

// TestScriptCheckTimeoutAndOutput: a script check is killed at its
// timeout and fails, saying so; its output is bounded.
func TestScriptCheckTimeoutAndOutput(t *testing.T) {
	c := &structs.ServiceCheck{Type: structs.ServiceCheckScript, Command: "x", Timeout: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	start := time.Now()
	r := runScriptCheck(ctx, fakeExecer{out: "started", block: true}, "a/t", c)
	if r.ok || !strings.Contains(r.output, "timed out after 100ms") || time.Since(start) > 2*time.Second {
		t.Fatalf("blocked script: %+v after %s", r, time.Since(start))
	}
	r = runScriptCheck(context.Background(), fakeExecer{out: strings.Repeat("y", 10*checkOutputLimit), code: 2}, "a/t", c)
	if r.ok || r.code != 2 || len(r.output) > checkOutputLimit+64 {
		t.Fatalf("noisy failing script: ok=%v code=%d output %d bytes", r.ok, r.code, len(r.output))
	}
	if r := runScriptCheck(context.Background(), fakeExecer{}, "a/t", c); !r.ok {
		t.Fatalf("exit 0 failed: %+v", r)
	}
}
