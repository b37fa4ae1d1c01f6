package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/agent/driver/native"
	"github.com/gpulayer/gpulayer/structs"
)

func noGPUs() ([]*structs.DeviceGroup, error) {
	return nil, fmt.Errorf("%w: test host", devices.ErrUnavailable)
}

func testLogger(t *testing.T) hclog.Logger {
	if testing.Verbose() {
		return hclog.New(&hclog.LoggerOptions{Name: "client", Level: hclog.Debug, Output: os.Stderr})
	}
	return hclog.NewNullLogger()
}

// newTestClient starts a dev-mode client against srv with simulated GPUs
// unless mod changes the config, and shuts it down when the test ends.
func newTestClient(t *testing.T, srv *clienttest.Server, dataDir string, mod func(*Config)) *Client {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{
		DataDir: dataDir,
		// Native tasks run as the test's user: the tests' programs and
		// temporary directories are not reachable by "nobody".
		NativeUsers:     native.UserPolicy{DefaultUser: me.Username},
		NodeName:        "test-node",
		DevMode:         true,
		DevGPUs:         -1,
		Servers:         srv,
		Logger:          testLogger(t),
		SyncInterval:    20 * time.Millisecond,
		RegisterTimeout: 10 * time.Second,
		detectGPUs:      noGPUs,
	}
	if mod != nil {
		mod(cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

func gpuIDs(n *structs.Node) []string {
	var ids []string
	for _, g := range n.NodeResources.Devices {
		for _, in := range g.Instances {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

func TestRegisterFingerprintAndDevGPUs(t *testing.T) {
	declared := devices.Simulated("decl0000", 1)
	declared.Name = "Declared GPU"
	cases := []struct {
		name    string
		mod     func(*Config)
		wantIDs func(nodeID string) []string
	}{
		{"dev mode default adds two", nil, func(id string) []string {
			return []string{"GPU-sim-" + id[:8] + "-0", "GPU-sim-" + id[:8] + "-1"}
		}},
		{"dev gpus 0 disables", func(c *Config) { c.DevGPUs = 0 }, func(string) []string { return nil }},
		{"dev gpus 3", func(c *Config) { c.DevGPUs = 3 }, func(id string) []string {
			return []string{"GPU-sim-" + id[:8] + "-0", "GPU-sim-" + id[:8] + "-1", "GPU-sim-" + id[:8] + "-2"}
		}},
		{"not dev mode adds none", func(c *Config) { c.DevMode = false }, func(string) []string { return nil }},
		{"declared simulated devices kept", func(c *Config) { c.DevGPUs = 0; c.SimulatedDevices = []*structs.DeviceGroup{declared} },
			func(string) []string { return []string{"GPU-sim-decl0000-0"} }},
		{"real nvml path on this host", func(c *Config) { c.detectGPUs = nil; c.DevGPUs = 0 }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := clienttest.NewServer()
			c := newTestClient(t, srv, "", tc.mod)
			n := c.Node()
			stored := srv.Node(n.ID)
			if stored == nil {
				t.Fatal("node not registered")
			}
			if tc.wantIDs != nil {
				got, want := gpuIDs(stored), tc.wantIDs(n.ID)
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("GPU instances %v, want %v", got, want)
				}
			}
			if stored.Datacenter != "dc1" || stored.Name != "test-node" || stored.Status != structs.NodeStatusReady {
				t.Errorf("node dc=%q name=%q status=%q", stored.Datacenter, stored.Name, stored.Status)
			}
			for _, k := range []string{"kernel.name", "cpu.arch", "cpu.numcores", "unique.hostname", "os.name", "cpu.frequency_source", "driver.native.version"} {
				if stored.Attributes[k] == "" {
					t.Errorf("attribute %q missing", k)
				}
			}
			if stored.Attributes["driver.native"] != "1" || stored.Attributes["memory_model"] != "discrete" || stored.Attributes["availability"] != "continuous" {
				t.Errorf("attributes %v", stored.Attributes)
			}
			if d := stored.Drivers["native"]; d == nil || !d.Healthy {
				t.Errorf("native driver not healthy: %+v", d)
			}
			r := stored.NodeResources
			if r.CPU <= 0 || r.MemoryMB <= 0 || r.Cores <= 0 || stored.ReservedResources.CPU != ReservedCPUMHz || stored.ReservedResources.MemoryMB != ReservedMemoryMB {
				t.Errorf("resources %+v reserved %+v", r, stored.ReservedResources)
			}
			if stored.SecretID == "" {
				t.Error("node has no secret")
			}
		})
	}
}

func TestRegisterRetriesAndConfigErrors(t *testing.T) {
	srv := clienttest.NewServer()
	srv.FailNextRegistrations(2)
	c := newTestClient(t, srv, "", nil)
	if reg, _, _ := srv.Counts(); reg != 1 || srv.Node(c.Node().ID) == nil {
		t.Fatalf("registrations = %d after two refusals", reg)
	}
	if _, err := NewClient(&Config{Servers: srv}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("NewClient without DataDir: %v, want ErrInvalid", err)
	}
	if _, err := NewClient(&Config{DataDir: t.TempDir()}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("NewClient without Servers: %v, want ErrInvalid", err)
	}
}

func eventOf(a *structs.Allocation, task, typ string) *structs.TaskEvent {
	if ts := a.TaskStates[task]; ts != nil {
		for _, e := range ts.Events {
			if e.Type == typ {
				return e
			}
		}
	}
	return nil
}

func readLogs(t *testing.T, c *Client, allocID, typ string) string {
	t.Helper()
	r, err := c.AllocLogs(context.Background(), allocID, "main", typ, false)
	if err != nil {
		t.Fatalf("AllocLogs: %v", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read logs: %v", err)
	}
	return string(b)
}

func terminal(a *structs.Allocation) bool { return a.ClientTerminalStatus() }

func TestBatchAllocGPUEnv(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	ids := gpuIDs(c.Node())
	script := `echo gpus=$CUDA_VISIBLE_DEVICES; echo nv=$NVIDIA_VISIBLE_DEVICES; echo count=$GPULAYER_GPU_COUNT; echo $GPULAYER_TASK_NAME; echo job=$GPULAYER_JOB_NAME group=$GPULAYER_GROUP_NAME; echo err >&2`
	cases := []struct {
		name string
		gpus []string
		want []string
	}{
		{"one gpu", ids[:1], []string{"gpus=" + ids[0] + "\n", "nv=" + ids[0] + "\n", "count=1\n", "main\n", "group=group\n"}},
		{"two gpus", ids[:2], []string{"gpus=" + ids[0] + "," + ids[1] + "\n", "count=2\n"}},
		{"no gpu hides host gpus", nil, []string{"gpus=\n", "nv=void\n", "count=0\n"}},
	}
	// Nomad's names for the same values, for jobspecs written for Nomad.
	script += `; echo nomad=$NOMAD_ALLOC_ID,$NOMAD_ALLOC_INDEX,$NOMAD_JOB_ID,$NOMAD_GROUP_NAME,$NOMAD_TASK_NAME,$NOMAD_NAMESPACE; echo taskdir=$NOMAD_TASK_DIR; test -d "$NOMAD_TASK_DIR" && test -d "$NOMAD_SECRETS_DIR" && echo dirs-ok`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/sh", []string{"-c", script}, tc.gpus)
			srv.UpsertAlloc(a)
			got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
			if got.ClientStatus != structs.AllocClientStatusComplete {
				t.Fatalf("client status %q: %s", got.ClientStatus, clienttest.DescribeTaskStates(got.TaskStates))
			}
			ts := got.TaskStates["main"]
			if ts.State != structs.TaskStateDead || ts.Failed || ts.StartedAt == 0 || ts.FinishedAt == 0 {
				t.Fatalf("task state %+v", ts)
			}
			for _, typ := range []string{structs.TaskEventReceived, structs.TaskEventSetup, structs.TaskEventStarted, structs.TaskEventTerminated} {
				if eventOf(got, "main", typ) == nil {
					t.Errorf("no %q event: %s", typ, clienttest.DescribeTaskStates(got.TaskStates))
				}
			}
			out := readLogs(t, c, a.ID, "stdout")
			want := append(tc.want, "nomad="+a.ID+",0,"+a.JobID+","+a.TaskGroup+",main,default\n",
				"taskdir="+filepath.Join(c.cfg.DataDir, "allocs", a.ID, "main", "local")+"\n", "dirs-ok\n")
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if errOut := readLogs(t, c, a.ID, "stderr"); errOut != "err\n" {
				t.Errorf("stderr = %q", errOut)
			}
			for _, d := range []string{"local", "secrets", "logs", "outputs"} {
				if fi, err := os.Stat(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "main", d)); err != nil || !fi.IsDir() {
					t.Errorf("task dir %s: %v", d, err)
				}
			}
		})
	}
}

func countRuns(t *testing.T, c *Client, allocID string) int {
	b, err := os.ReadFile(filepath.Join(c.cfg.DataDir, "allocs", allocID, "runs"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestRestartPolicy(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	cases := []struct {
		name       string
		jobType    string
		script     string
		attempts   int
		wantStatus string
		wantRuns   int
	}{
		{"batch failure restarts twice then fails", structs.JobTypeBatch, "echo run >> $GPULAYER_ALLOC_DIR/runs; exit 1", 2, structs.AllocClientStatusFailed, 3},
		{"batch success never restarts", structs.JobTypeBatch, "echo run >> $GPULAYER_ALLOC_DIR/runs; exit 0", 2, structs.AllocClientStatusComplete, 1},
		{"service exit 0 restarts per policy", structs.JobTypeService, "echo run >> $GPULAYER_ALLOC_DIR/runs; exit 0", 1, structs.AllocClientStatusFailed, 2},
		{"signal death counts as failure", structs.JobTypeBatch, "echo run >> $GPULAYER_ALLOC_DIR/runs; kill -9 $$", 1, structs.AllocClientStatusFailed, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := clienttest.NativeAlloc(c.Node().ID, tc.jobType, "/bin/sh", []string{"-c", tc.script}, nil)
			a.Job.TaskGroups[0].RestartPolicy = &structs.RestartPolicy{Attempts: tc.attempts, Interval: time.Minute, Delay: 10 * time.Millisecond, Mode: structs.RestartModeFail}
			srv.UpsertAlloc(a)
			got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
			if got.ClientStatus != tc.wantStatus {
				t.Fatalf("status %q, want %q: %s", got.ClientStatus, tc.wantStatus, clienttest.DescribeTaskStates(got.TaskStates))
			}
			if n := countRuns(t, c, a.ID); n != tc.wantRuns {
				t.Fatalf("ran %d times, want %d", n, tc.wantRuns)
			}
			ts := got.TaskStates["main"]
			if int(ts.Restarts) != tc.wantRuns-1 {
				t.Errorf("restarts = %d, want %d", ts.Restarts, tc.wantRuns-1)
			}
			if tc.wantStatus == structs.AllocClientStatusFailed {
				if !ts.Failed || eventOf(got, "main", structs.TaskEventNotRestarting) == nil {
					t.Errorf("want failed with a Not Restarting event: %s", clienttest.DescribeTaskStates(got.TaskStates))
				}
				if tc.attempts > 0 && eventOf(got, "main", structs.TaskEventRestarting) == nil {
					t.Errorf("no Restarting event")
				}
			}
		})
	}
}

func TestRestartTrackerDelayMode(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRestartTracker(&structs.RestartPolicy{Attempts: 1, Interval: time.Minute, Delay: time.Second, Mode: structs.RestartModeDelay}, structs.JobTypeService)
	r.now = func() time.Time { return now }
	if ok, d, _ := r.next(); !ok || d != time.Second {
		t.Fatalf("first restart: %v %s", ok, d)
	}
	now = now.Add(10 * time.Second)
	ok, d, reason := r.next()
	if !ok || d != 50*time.Second || !strings.Contains(reason, "delay") {
		t.Fatalf("delay mode: restart=%v delay=%s reason=%q; want a 50s wait to the window end", ok, d, reason)
	}
	now = now.Add(d)
	if ok, d, _ := r.next(); !ok || d != time.Second {
		t.Fatalf("after the window: %v %s", ok, d)
	}
	f := newRestartTracker(&structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Mode: structs.RestartModeFail}, structs.JobTypeBatch)
	if ok, _, _ := f.next(); ok {
		t.Fatal("fail mode with 0 attempts restarted")
	}
}

func TestDriverFailures(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	cases := []struct {
		name    string
		command string
		want    string
	}{
		{"missing command", "/no/such/command-xyz", "/no/such/command-xyz"},
		{"command is a directory", "/tmp", "is a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, tc.command, nil, nil)
			a.Job.TaskGroups[0].RestartPolicy.Attempts = 3
			srv.UpsertAlloc(a)
			got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
			if got.ClientStatus != structs.AllocClientStatusFailed {
				t.Fatalf("status %q", got.ClientStatus)
			}
			e := eventOf(got, "main", structs.TaskEventDriverFailure)
			if e == nil || !strings.Contains(e.DisplayMessage, tc.want) {
				t.Fatalf("driver failure event %+v does not name %q", e, tc.want)
			}
		})
	}
	t.Run("unknown driver", func(t *testing.T) {
		a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/true", nil, nil)
		a.Job.TaskGroups[0].Tasks[0].Driver = "podman"
		srv.UpsertAlloc(a)
		got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
		if e := eventOf(got, "main", structs.TaskEventDriverFailure); got.ClientStatus != structs.AllocClientStatusFailed || e == nil || !strings.Contains(e.DisplayMessage, "podman") {
			t.Fatalf("status %q event %+v", got.ClientStatus, e)
		}
	})
}

func running(a *structs.Allocation) bool { return a.ClientStatus == structs.AllocClientStatusRunning }

func TestDesiredStopKillsService(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "echo started; exec sleep 60"}, nil)
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	start := time.Now()
	if err := srv.StopAlloc(a.ID); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	if got.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("status %q: %s", got.ClientStatus, clienttest.DescribeTaskStates(got.TaskStates))
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("stop took %s", el)
	}
	ts := got.TaskStates["main"]
	if ts.Failed || eventOf(got, "main", structs.TaskEventKilling) == nil || eventOf(got, "main", structs.TaskEventKilled) == nil {
		t.Fatalf("want dead, not failed, with Killing and Killed: %s", clienttest.DescribeTaskStates(got.TaskStates))
	}
}

func TestAllocRemovedFromServerIsStopped(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "echo $$ > $GPULAYER_ALLOC_DIR/pid; exec sleep 60"}, nil)
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	var pid int
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0, "no pid written"
	})
	srv.DeleteAlloc(a.ID)
	clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
		return c.NumAllocs() == 0, fmt.Sprintf("%d allocs held", c.NumAllocs())
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("task process %d still exists after its alloc was removed (kill 0: %v)", pid, err)
	}
}

func TestParseMemTotalAndHeartbeatInterval(t *testing.T) {
	cases := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"MemTotal:       16303412 kB\nMemFree: 1 kB\n", 15921, false},
		{"MemFree: 1 kB\n", 0, true},
		{"MemTotal: lots kB\n", 0, true},
	}
	for _, tc := range cases {
		got, err := parseMemTotal([]byte(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseMemTotal(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	for i := 0; i < 100; i++ {
		d := heartbeatInterval(10 * time.Second)
		if d > 5*time.Second || d <= 4*time.Second {
			t.Fatalf("heartbeatInterval(10s) = %s, want in (4s, 5s]", d)
		}
	}
	if d := heartbeatInterval(0); d != time.Second {
		t.Fatalf("heartbeatInterval(0) = %s", d)
	}
}

func TestAllocLogs(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(c *Config) { c.logMaxFileSizeBytes = 100; c.LogMaxFiles = 1000 })
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "sleep 0.3; i=0; while [ $i -lt 200 ]; do echo line $i; i=$((i+1)); done"}, nil)
	srv.UpsertAlloc(a)
	// Follow from before the first output to the task's end.
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) { return c.NumAllocs() == 1, "alloc not received" })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.AllocLogs(ctx, a.ID, "main", "stdout", true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	var want strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if string(b) != want.String() {
		t.Fatalf("followed %d bytes, want %d", len(b), want.Len())
	}
	if idx, _ := logIndexes(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "main", "logs"), "main.stdout"); len(idx) < 5 {
		t.Errorf("only %d log files; rotation expected", len(idx))
	}
	errCases := []struct {
		name, alloc, task, typ string
		want                   error
	}{
		{"unknown alloc", "nope", "main", "stdout", structs.ErrNotFound},
		{"unknown task", a.ID, "other", "stdout", structs.ErrNotFound},
		{"path escape", "..", "main", "stdout", structs.ErrNotFound},
		{"bad type", a.ID, "main", "stdin", structs.ErrInvalid},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.AllocLogs(context.Background(), tc.alloc, tc.task, tc.typ, false); !errors.Is(err, tc.want) {
				t.Fatalf("AllocLogs: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestHeartbeatReRegistersUnknownNode(t *testing.T) {
	srv := clienttest.NewServer()
	srv.SetHeartbeatTTL(200 * time.Millisecond)
	c := newTestClient(t, srv, "", nil)
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		_, hb, _ := srv.Counts()
		return hb >= 2, fmt.Sprintf("%d heartbeats", hb)
	})
	srv.DeleteNode(c.Node().ID)
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return srv.Node(c.Node().ID) != nil, "node not registered again"
	})
}

func TestRestartKeepsNodeAndNeverRerunsFinished(t *testing.T) {
	srv := clienttest.NewServer()
	dir := t.TempDir()
	c1 := newTestClient(t, srv, dir, nil)
	nodeID := c1.Node().ID
	done := clienttest.NativeAlloc(nodeID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo run >> $GPULAYER_ALLOC_DIR/runs"}, nil)
	srv.UpsertAlloc(done)
	srv.WaitForAlloc(t, done.ID, 15*time.Second, terminal)
	svc := clienttest.NativeAlloc(nodeID, structs.JobTypeService, "/bin/sh", []string{"-c", "echo run >> $GPULAYER_ALLOC_DIR/runs; exec sleep 60"}, nil)
	srv.UpsertAlloc(svc)
	srv.WaitForAlloc(t, svc.ID, 15*time.Second, running)
	// Running goes out when the process is spawned, before the shell has
	// written its line: wait for the line, or Shutdown may kill the shell
	// first and this life never counts.
	clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
		n := countRuns(t, c1, svc.ID)
		return n == 1, fmt.Sprintf("service ran %d times in the first life", n)
	})
	if err := c1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// Shutdown kills the service task but does not report it failed.
	if a := srv.Alloc(svc.ID); a.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("after shutdown the server sees %q, want running", a.ClientStatus)
	}
	// Pretend the completion never reached the servers: only the local
	// state file knows the batch alloc finished.
	lost := srv.Alloc(done.ID)
	lost.ClientStatus = structs.AllocClientStatusRunning
	srv.UpsertAlloc(lost)

	c2 := newTestClient(t, srv, dir, nil)
	if c2.Node().ID != nodeID || c2.Node().SecretID != c1.Node().SecretID {
		t.Fatalf("node identity changed: %s -> %s", nodeID, c2.Node().ID)
	}
	// Shutdown stopped the service task, so it runs again (a client that
	// dies without Shutdown reattaches instead: reattach_test.go).
	clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
		n := countRuns(t, c2, svc.ID)
		return n == 2, fmt.Sprintf("service ran %d times", n)
	})
	// The finished batch alloc is reported complete again, never re-run.
	got := srv.WaitForAlloc(t, done.ID, 15*time.Second, terminal)
	if got.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("batch alloc status %q", got.ClientStatus)
	}
	if n := countRuns(t, c2, done.ID); n != 1 {
		t.Fatalf("finished alloc ran %d times", n)
	}
	if c2.NumAllocs() != 1 {
		t.Fatalf("NumAllocs = %d, want 1 (only the service)", c2.NumAllocs())
	}
	// A finished alloc's logs stay readable after the restart.
	if out := readLogs(t, c2, done.ID, "stdout"); out != "" {
		t.Fatalf("unexpected stdout %q", out)
	}
}
