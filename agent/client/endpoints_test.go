package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/client/endpoint"
	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/native"
	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/structs"
)

// buildModelServer builds agent/testdata/modelserver with main.build set
// to build (another value makes another binary) into dir.
func buildModelServer(t testing.TB, dir, build string) string {
	t.Helper()
	bin := filepath.Join(dir, "modelserver-"+build)
	cmd := exec.Command("go", "build", "-ldflags", "-X main.build="+build, "-o", bin, "./agent/testdata/modelserver")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build modelserver: %v\n%s", err, out)
	}
	return bin
}

// flakyServer is a clienttest.Server whose every call fails while down is
// set, as servers that cannot be reached.
type flakyServer struct {
	*clienttest.Server
	down atomic.Bool
}

var errServersDown = errors.New("servers unreachable (test)")

func (f *flakyServer) NodeRegister(ctx context.Context, n *structs.Node) (time.Duration, error) {
	if f.down.Load() {
		return 0, errServersDown
	}
	return f.Server.NodeRegister(ctx, n)
}

func (f *flakyServer) NodeUpdateStatus(ctx context.Context, id, st string) (time.Duration, error) {
	if f.down.Load() {
		return 0, errServersDown
	}
	return f.Server.NodeUpdateStatus(ctx, id, st)
}

func (f *flakyServer) NodeAllocations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	if f.down.Load() {
		return nil, structs.QueryMeta{}, errServersDown
	}
	return f.Server.NodeAllocations(ctx, id, q)
}

func (f *flakyServer) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	if f.down.Load() {
		return errServersDown
	}
	return f.Server.UpdateAllocs(ctx, allocs)
}

// endpointAllocs returns n allocations of one service job whose group has
// an endpoint on port epPort, each running bin with MODEL=models[i] (the
// last entry for the rest) on its own host port "http".
func endpointAllocs(t *testing.T, nodeID string, epPort, n int, bins, models []string) []*structs.Allocation {
	t.Helper()
	base := clienttest.NativeAlloc(nodeID, structs.JobTypeService, bins[0], nil, nil)
	job := base.Job
	tg := job.TaskGroups[0]
	tg.Count = n
	tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
	tg.Endpoint = &structs.Endpoint{Name: "llm-test", Port: epPort, Model: "m1"}
	tg.Services = []*structs.Service{{Name: "llm", PortLabel: "http", Checks: []*structs.ServiceCheck{{
		Type: structs.ServiceCheckHTTP, Path: "/health", Interval: 100 * time.Millisecond, Timeout: time.Second}}}}
	var out []*structs.Allocation
	for i := 0; i < n; i++ {
		a := base.Copy()
		a.ID = structs.GenerateUUID()
		a.Name = structs.AllocName(job.ID, tg.Name, i)
		a.AllocatedResources.Shared = &structs.AllocatedSharedResources{Ports: []structs.AllocatedPortMapping{{Label: "http", Value: porttest.Take(t), HostIP: "127.0.0.1"}}}
		// Each allocation its own copy of the job when a member differs.
		bin, model := bins[min(i, len(bins)-1)], models[min(i, len(models)-1)]
		if bin != bins[0] || model != models[0] {
			j := *job
			g := *tg
			task := *tg.Tasks[0]
			task.Config = map[string]interface{}{"command": bin}
			task.Env = map[string]string{"MODEL": model}
			g.Tasks = []*structs.Task{&task}
			j.TaskGroups = []*structs.TaskGroup{&g}
			a.Job = &j
		} else {
			tg.Tasks[0].Config = map[string]interface{}{"command": bin}
			tg.Tasks[0].Env = map[string]string{"MODEL": model}
		}
		out = append(out, a)
	}
	return out
}

func memberOf(t *testing.T, url string) (string, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	var got struct{ Alloc string }
	if err := json.Unmarshal(body, &got); err != nil {
		return "", fmt.Errorf("%v: %s", err, body)
	}
	if h := resp.Header.Get(endpoint.MemberHeader); h != got.Alloc {
		return "", fmt.Errorf("member header %q, body names %q", h, got.Alloc)
	}
	return got.Alloc, nil
}

// TestEndpointManagerRoutesReportsAndSurvivesServers: the client runs
// one router on the endpoint's port for the group's members on this node,
// admits the identical members serving the model, refuses (with the
// reason on its allocation) one serving another model and one from
// another binary, keeps routing while every server call fails, drops a
// member whose process is killed without a failed request, and on stop
// closes the router and reports each member stopped only after its
// process group is gone.
func TestEndpointManagerRoutesReportsAndSurvivesServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs model servers")
	}
	binDir := t.TempDir()
	binA, binB := buildModelServer(t, binDir, "a"), buildModelServer(t, binDir, "b")
	srv := &flakyServer{Server: clienttest.NewServer()}
	c := newTestClient(t, srv.Server, "", func(cfg *Config) {
		cfg.Servers = srv
		cfg.EndpointVerifyInterval = 100 * time.Millisecond
	})
	epPort := porttest.Take(t)
	allocs := endpointAllocs(t, c.Node().ID, epPort, 4, []string{binA, binA, binA, binB}, []string{"m1", "m1", "other-model", "m1"})
	for _, a := range allocs {
		srv.UpsertAlloc(a)
	}
	admitted := func(a *structs.Allocation) bool { return a.EndpointMember != nil && a.EndpointMember.Admitted }
	for _, a := range allocs[:2] {
		srv.WaitForAlloc(t, a.ID, 30*time.Second, admitted)
	}
	refused := map[string]string{allocs[2].ID: "model", allocs[3].ID: "digest"}
	for id, word := range refused {
		got := srv.WaitForAlloc(t, id, 30*time.Second, func(a *structs.Allocation) bool {
			return a.EndpointMember != nil && !a.EndpointMember.Admitted && strings.Contains(a.EndpointMember.Reason, word)
		})
		t.Logf("refused %s: %s", id[:8], got.EndpointMember.Reason)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/completions", epPort)
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		m, err := memberOf(t, url)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		seen[m]++
	}
	if seen[allocs[0].ID] != 10 || seen[allocs[1].ID] != 10 {
		t.Fatalf("20 requests spread %v, want 10 to each admitted member", seen)
	}

	// The client route's view: the router's members with their processes.
	var st *structs.ClientEndpointStatus
	for _, s := range c.Endpoints() {
		if s.JobID == allocs[0].JobID {
			st = s
		}
	}
	if st == nil || st.Admitted != 2 || len(st.Members) != 4 {
		t.Fatalf("endpoint status = %+v", st)
	}
	pid := 0
	for _, m := range st.Members {
		if len(m.Processes) != 1 || !m.Processes[0].Alive || m.Processes[0].PID <= 0 || m.Processes[0].RSSMiB <= 0 {
			t.Fatalf("member %s processes = %+v", m.AllocID[:8], m.Processes)
		}
		if m.AllocID == allocs[1].ID {
			pid = m.Processes[0].PID
		}
	}

	// Every server call fails from now on: routing goes on.
	srv.down.Store(true)
	for i := 0; i < 20; i++ {
		if _, err := memberOf(t, url); err != nil {
			t.Fatalf("request %d with the servers down: %v", i, err)
		}
	}
	// A member killed between requests is dropped (its checks and live
	// verification fail) without a failed request: the router never
	// dispatches to a member it cannot connect to.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
		var adm []string
		for _, s := range c.Endpoints() {
			for _, m := range s.Members {
				if m.Admitted {
					adm = append(adm, m.AllocID)
				}
			}
		}
		return len(adm) == 1 && adm[0] == allocs[0].ID, fmt.Sprintf("admitted %v", adm)
	})
	for i := 0; i < 20; i++ {
		m, err := memberOf(t, url)
		if err != nil || m != allocs[0].ID {
			t.Fatalf("request %d after the kill: %s %v", i, m, err)
		}
	}
	srv.down.Store(false)

	// Stop: the router closes and each member ends with its processes
	// proven gone.
	var wg sync.WaitGroup
	for _, a := range allocs {
		if err := srv.StopAlloc(a.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range allocs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.WaitForAlloc(t, a.ID, 30*time.Second, terminal)
		}()
	}
	wg.Wait()
	for _, a := range []*structs.Allocation{allocs[0], allocs[2], allocs[3]} {
		got := srv.Alloc(a.ID)
		if got.ClientStatus != structs.AllocClientStatusComplete || got.EndpointMember == nil || got.EndpointMember.Admitted ||
			got.EndpointMember.Reason != reasonStopped {
			t.Fatalf("stopped member %s: %s %q %+v", a.ID[:8], got.ClientStatus, got.ClientDescription, got.EndpointMember)
		}
	}
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		_, err := http.Get(url)
		return err != nil && len(c.Endpoints()) == 0, fmt.Sprintf("router still answers: %v %d", err, len(c.Endpoints()))
	})
	if _, err := os.Stat(binA); err != nil {
		t.Fatal(err)
	}
}

// unprovenDriver is a driver that cannot prove its tasks gone (it hides
// the native driver's GoneProver).
type unprovenDriver struct{ driver.Driver }

// TestEndpointMemberWithoutGoneProofFails: a stopped endpoint member whose
// driver cannot prove its processes gone is reported failed, saying so,
// never complete; one whose driver proves it is complete and stopped.
func TestEndpointMemberWithoutGoneProofFails(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, proven := range []bool{true, false} {
		t.Run(fmt.Sprintf("proven=%v", proven), func(t *testing.T) {
			srv := clienttest.NewServer()
			c := newTestClient(t, srv, "", func(cfg *Config) {
				nd := native.NewWithConfig(native.Config{Users: native.UserPolicy{DefaultUser: me.Username}})
				if proven {
					cfg.Drivers = []driver.Driver{nd}
				} else {
					cfg.Drivers = []driver.Driver{unprovenDriver{nd}}
				}
			})
			a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "sleep 60 & exec sleep 60"}, nil)
			tg := a.Job.TaskGroups[0]
			tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
			tg.Endpoint = &structs.Endpoint{Name: "llm-proof", Port: porttest.Take(t), Model: "m"}
			a.AllocatedResources.Shared = &structs.AllocatedSharedResources{Ports: []structs.AllocatedPortMapping{{Label: "http", Value: porttest.Take(t), HostIP: "127.0.0.1"}}}
			srv.UpsertAlloc(a)
			srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
			if err := srv.StopAlloc(a.ID); err != nil {
				t.Fatal(err)
			}
			got := srv.WaitForAlloc(t, a.ID, 30*time.Second, terminal)
			em := got.EndpointMember
			if proven {
				if got.ClientStatus != structs.AllocClientStatusComplete || em == nil || em.Reason != reasonStopped {
					t.Fatalf("proven stop: %s %q %+v", got.ClientStatus, got.ClientDescription, em)
				}
				return
			}
			if got.ClientStatus != structs.AllocClientStatusFailed || !strings.Contains(got.ClientDescription, "cannot prove") ||
				em == nil || !strings.Contains(em.Reason, "cannot prove") {
				t.Fatalf("unproven stop: %s %q %+v", got.ClientStatus, got.ClientDescription, em)
			}
		})
	}
}
