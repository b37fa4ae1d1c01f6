package client

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestReadProcess: this process lives and has a resident size; a reaped
// child does not live; a zombie does not live; the parser takes State
// and VmRSS and refuses a malformed VmRSS.
func TestReadProcess(t *testing.T) {
	alive, rss, err := readProcess(os.Getpid())
	if err != nil || !alive || rss <= 0 {
		t.Fatalf("self: alive=%v rss=%v err=%v", alive, rss, err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true:", err)
	}
	if alive, _, err := readProcess(cmd.Process.Pid); alive || err != nil {
		t.Fatalf("reaped child: alive=%v err=%v", alive, err)
	}
	if _, _, err := readProcess(0); err == nil {
		t.Fatal("pid 0 read without an error")
	}
	cases := []struct {
		text  string
		alive bool
		rss   float64
		bad   bool
	}{
		{"Name:\tx\nState:\tS (sleeping)\nVmRSS:\t    2048 kB\n", true, 2, false},
		{"State:\tZ (zombie)\n", false, 0, false},
		{"State:\tX (dead)\n", false, 0, false},
		{"State:\tR (running)\nVmRSS:\tlots kB\n", false, 0, true},
		{"VmRSS:\t1 kB\n", false, 0, true},
	}
	for _, tc := range cases {
		alive, rss, err := parseProcStatus([]byte(tc.text))
		if (err != nil) != tc.bad || alive != tc.alive || rss != tc.rss {
			t.Errorf("%q: alive=%v rss=%v err=%v", tc.text, alive, rss, err)
		}
	}
}

// TestMemberAddr: the member port is the named label, or the group's only
// label; several labels without member_port, or a label the allocation
// lacks, are refused with a reason.
func TestMemberAddr(t *testing.T) {
	a := &structs.Allocation{AllocatedResources: &structs.AllocatedResources{Shared: &structs.AllocatedSharedResources{Ports: []structs.AllocatedPortMapping{
		{Label: "http", Value: 20001}, {Label: "metrics", Value: 20002, HostIP: "10.0.0.5"}}}}}
	one := &structs.TaskGroup{Networks: []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}}
	two := &structs.TaskGroup{Networks: []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}, ReservedPorts: []structs.Port{{Label: "metrics"}}}}}
	cases := []struct {
		tg    *structs.TaskGroup
		label string
		want  string
		err   string
	}{
		{one, "", "192.0.2.1:20001", ""},
		{two, "metrics", "10.0.0.5:20002", ""},
		{two, "", "", "2 port labels"},
		{one, "grpc", "", `no port "grpc"`},
	}
	for _, tc := range cases {
		got, err := memberAddr(a, tc.tg, &structs.Endpoint{MemberPort: tc.label}, "192.0.2.1")
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("label %q: %q %v", tc.label, got, err)
		}
	}
}

// TestClipReason: reasons fit the servers' bound as valid UTF-8.
func TestClipReason(t *testing.T) {
	long := strings.Repeat("é", structs.MaxEndpointReasonBytes)
	for _, s := range []string{"short", long, "bad \xff byte", strings.Repeat("x", 10*structs.MaxEndpointReasonBytes)} {
		got := clipReason(s)
		if len(got) > structs.MaxEndpointReasonBytes || !utf8.ValidString(got) {
			t.Errorf("clipReason(%.20q) = %d bytes, valid %v", s, len(got), utf8.ValidString(got))
		}
		if err := (&structs.EndpointMemberStatus{Reason: got}).CheckWellFormed(); err != nil {
			t.Error(err)
		}
	}
	if clipReason("short") != "short" {
		t.Fatal("a short reason changed")
	}
}

// FuzzParseProcStatus: any /proc/<pid>/status text parses without a panic,
// and a process it calls alive has a State line that is neither Z nor X.
func FuzzParseProcStatus(f *testing.F) {
	f.Add([]byte("Name:\tx\nState:\tS (sleeping)\nVmRSS:\t    2048 kB\n"))
	f.Add([]byte("State:\tZ (zombie)\n"))
	f.Add([]byte("State:\nVmRSS:\n"))
	f.Add([]byte("VmRSS:\t18446744073709551615 kB\nState:\tR\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		alive, rss, err := parseProcStatus(b)
		if err != nil {
			return
		}
		if rss < 0 {
			t.Fatalf("negative RSS %v", rss)
		}
		if alive && !strings.Contains(string(b), "State:") {
			t.Fatal("alive without a State line")
		}
	})
}

// TestEndpointRouterReplacementKeepsThePort: a new job version that
// changes the endpoint block (a new revision, the normal way to roll out
// a model) replaces the router on the same port. The new router must
// bind at once: the old one gives the port up before the new one
// listens, and only its drain goes on in the background. Before, the old
// router was closed in a goroutine while the new one bound, so the new
// Listen lost the race, the port refused connections for the retry
// delay and every member reported "cannot serve".
func TestEndpointRouterReplacementKeepsThePort(t *testing.T) {
	m := &endpointManager{logger: hclog.NewNullLogger(), newRouter: newRouterFactory(&Config{}),
		routers: map[endpointKey]*endpointRun{}, failed: map[endpointKey]endpointFailure{}}
	t.Cleanup(m.closeAll)
	k := endpointKey{Namespace: "default", JobID: "serve", Group: "llm"}
	port := porttest.Take(t)
	for i := 0; i < 20; i++ {
		ep := &structs.Endpoint{Name: "llm", Port: port, Model: "m", Revision: fmt.Sprintf("r%d", i)}
		run, err := m.routerFor(t.Context(), k, ep, "127.0.0.1")
		if err != nil {
			t.Fatalf("revision %d: %v", i, err)
		}
		if run.ep.Revision != ep.Revision {
			t.Fatalf("revision %d: router of %q", i, run.ep.Revision)
		}
	}
}

// reattachingDriver is a driver that does not know the task until
// reattached is set, as the native driver before RecoverTask ran.
type reattachingDriver struct {
	driver.Driver
	exe        string
	reattached atomic.Bool
}

func (d *reattachingDriver) Name() string { return "native" }

func (d *reattachingDriver) InspectTask(id string) (*driver.TaskStatus, error) {
	if !d.reattached.Load() {
		return nil, driver.ErrTaskNotFound
	}
	return &driver.TaskStatus{ID: id, State: driver.TaskStateRunning, Executable: d.exe}, nil
}

// TestEndpointIdentityAfterReattachIsComputedAgain: after a client
// restart the allocation's task states say running (restored) before the
// driver has reattached the task. The identity asked for in that window
// fails ("not running"); it must be asked again once the task is
// reattached, not kept until the task next starts, which for a
// reattached member is never: it stayed unadmitted for good (found by
// kill -9 of the client agent while its router served).
func TestEndpointIdentityAfterReattachIsComputedAgain(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	drv := &reattachingDriver{exe: exe}
	task := &structs.Task{Name: "server", Driver: "native", Config: map[string]interface{}{"command": exe}}
	tg := &structs.TaskGroup{Name: "llm", Count: 2, Tasks: []*structs.Task{task}}
	a := &structs.Allocation{ID: "a0", Job: &structs.Job{ID: "serve", Version: 3, TaskGroups: []*structs.TaskGroup{tg}}, TaskGroup: "llm"}
	ar := &allocRunner{alloc: a,
		tasks:      map[string]*taskRunner{"server": {alloc: a, task: task, drv: drv}},
		taskStates: map[string]*structs.TaskState{"server": {State: structs.TaskStateRunning, StartedAt: 1234}}}
	var digests fileDigestCache
	if _, err := ar.endpointIdentity(tg, &digests); err == nil {
		t.Fatal("identity before the reattach: no error")
	}
	drv.reattached.Store(true)
	id, err := ar.endpointIdentity(tg, &digests)
	if err != nil {
		t.Fatalf("identity after the reattach: %v", err)
	}
	if id.JobVersion != 3 || id.ArtifactDigest == "" || id.ConfigDigest == "" {
		t.Fatalf("identity after the reattach: %+v", id)
	}
}
