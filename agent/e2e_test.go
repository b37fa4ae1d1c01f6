package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// repoRoot is the module root, two levels up from this file's package.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gpulayerBinary builds the real binary once per test process.
func gpulayerBinary(t testing.TB) string {
	t.Helper()
	skipChildProcessesUnderRace(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpulayer-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gpulayer")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// skipChildProcessesUnderRace skips, when this test binary runs under
// -race, a test that drives gpulayer processes it starts: they are built
// without the race detector, so under -race it would watch only the test's
// own harness while costing the race pass as long as the plain pass (about
// 6 of the agent package's 7 minutes are such tests, mostly waiting on
// real timers). The plain pass of `make test` runs them in full; the race
// pass keeps the package's in-process agents, servers and HTTP tests.
func skipChildProcessesUnderRace(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("drives gpulayer child processes built without -race; the plain pass runs it")
	}
}

// freePort is a port for an agent the test starts; see internal/porttest
// for why a released port-0 listener is not enough.
func freePort(t testing.TB) int {
	t.Helper()
	return porttest.Take(t)
}

// devAgent is a `gpulayer agent -dev` process.
type devAgent struct {
	t       testing.TB
	bin     string
	dataDir string
	addr    string // http://127.0.0.1:port
	args    []string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	done    chan struct{}
}

func startDevAgent(t testing.TB, dataDir string, extra ...string) *devAgent {
	t.Helper()
	letTaskUsersIn(t, dataDir)
	httpPort, raftPort := freePort(t), freePort(t)
	a := &devAgent{
		t: t, bin: gpulayerBinary(t), dataDir: dataDir,
		addr: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		args: append([]string{"agent", "-dev", "-data-dir=" + dataDir,
			fmt.Sprintf("-http-port=%d", httpPort), fmt.Sprintf("-raft-port=%d", raftPort)}, extra...),
	}
	a.start()
	t.Cleanup(a.stop)
	return a
}

func (a *devAgent) start() {
	a.t.Helper()
	a.log = &bytes.Buffer{}
	a.cmd = exec.Command(a.bin, a.args...)
	a.cmd.Stdout = &lockedWriter{w: a.log}
	a.cmd.Stderr = a.cmd.Stdout
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.done = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	waittest.For(a.t, 30*time.Second, "agent healthy", func() (bool, string) {
		select {
		case <-a.done:
			a.t.Fatalf("agent exited early:\n%s", a.logText())
		default:
		}
		resp, err := http.Get(a.addr + "/v1/status/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
}

// stop sends SIGTERM and waits for a clean exit.
func (a *devAgent) stop() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		a.t.Errorf("agent did not stop within 20s of SIGTERM:\n%s", a.logText())
	}
}

func (a *devAgent) logText() string {
	lw := a.cmd.Stdout.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return a.log.String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// cli runs the gpulayer CLI against the agent and returns its combined
// output and exit code.
func (a *devAgent) cli(args ...string) (string, int) {
	a.t.Helper()
	cmd := exec.Command(a.bin, args...)
	cmd.Dir = repoRoot(a.t)
	cmd.Env = append(os.Environ(), "GPULAYER_ADDR="+a.addr)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		a.t.Fatal(err)
	}
	return string(out), code
}

func (a *devAgent) getJSON(path string, out interface{}) int {
	a.t.Helper()
	resp, err := http.Get(a.addr + path)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			a.t.Fatalf("GET %s: decode %q: %v", path, body, err)
		}
	}
	return resp.StatusCode
}

func (a *devAgent) waitAllocStatus(jobID string, want ...string) *api.Allocation {
	a.t.Helper()
	var got *api.Allocation
	waittest.For(a.t, 60*time.Second, fmt.Sprintf("an allocation of %s in %v", jobID, want), func() (bool, string) {
		var allocs []*api.Allocation
		if code := a.getJSON("/v1/job/"+jobID+"/allocations", &allocs); code != 200 {
			return false, fmt.Sprintf("status %d", code)
		}
		for _, al := range allocs {
			for _, w := range want {
				if al.ClientStatus == w {
					got = al
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d allocs", len(allocs))
	})
	var full api.Allocation
	if code := a.getJSON("/v1/allocation/"+got.ID, &full); code != 200 {
		a.t.Fatalf("GET allocation: %d", code)
	}
	return &full
}

func TestE2EHelloGPURunsAndSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	dataDir := t.TempDir()
	a := startDevAgent(t, dataDir)

	out, code := a.cli("job", "run", "examples/hello-gpu.hcl")
	if code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	alloc := a.waitAllocStatus("hello-gpu", structs.AllocClientStatusComplete, structs.AllocClientStatusFailed)
	if alloc.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("allocation %s is %s: %+v\nagent log:\n%s", alloc.ID, alloc.ClientStatus, alloc.TaskStates, a.logText())
	}
	ids := alloc.DeviceIDs()
	if len(ids) != 1 {
		t.Fatalf("allocation holds devices %v, want exactly 1", ids)
	}

	var task string
	for name := range alloc.TaskStates {
		task = name
	}
	resp, err := http.Get(fmt.Sprintf("%s/v1/client/fs/logs/%s?task=%s&type=stdout&plain=true", a.addr, alloc.ID, task))
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, id := range ids {
		if !strings.Contains(string(logs), id) {
			t.Errorf("stdout %q does not name the assigned GPU %s", logs, id)
		}
	}
	cliLogs, code := a.cli("alloc", "logs", alloc.ID, task)
	if code != 0 || cliLogs != string(logs) {
		t.Errorf("alloc logs exited %d with %q, want %q", code, cliLogs, logs)
	}

	var jobBefore structs.Job
	a.getJSON("/v1/job/hello-gpu", &jobBefore)

	// Restart the agent on the same data dir: the job and its allocation
	// must be unchanged, and the finished batch allocation not re-run.
	a.stop()
	a.start()
	var jobAfter structs.Job
	if code := a.getJSON("/v1/job/hello-gpu", &jobAfter); code != 200 {
		t.Fatalf("after restart GET job: %d", code)
	}
	if jobAfter.JobModifyIndex != jobBefore.JobModifyIndex || jobAfter.Version != jobBefore.Version {
		t.Errorf("job changed across restart: before %+v after %+v", jobBefore, jobAfter)
	}
	var allocAfter api.Allocation
	if code := a.getJSON("/v1/allocation/"+alloc.ID, &allocAfter); code != 200 {
		t.Fatalf("after restart GET allocation: %d", code)
	}
	if allocAfter.ClientStatus != structs.AllocClientStatusComplete || allocAfter.NodeID != alloc.NodeID ||
		strings.Join(allocAfter.DeviceIDs(), ",") != strings.Join(ids, ",") {
		t.Errorf("allocation changed across restart: before %s on %s %v, after %s on %s %v",
			alloc.ClientStatus, alloc.NodeID, ids, allocAfter.ClientStatus, allocAfter.NodeID, allocAfter.DeviceIDs())
	}
	// Give the client time to (wrongly) re-run it, then check it did not.
	time.Sleep(time.Second)
	var allocs []*api.Allocation
	a.getJSON("/v1/job/hello-gpu/allocations", &allocs)
	if len(allocs) != 1 {
		t.Errorf("after restart the job has %d allocations, want 1", len(allocs))
	}
	var again api.Allocation
	a.getJSON("/v1/allocation/"+alloc.ID, &again)
	if ts := again.TaskStates[task]; ts == nil || !ts.StartedAt.Equal(alloc.TaskStates[task].StartedAt) {
		t.Errorf("task was restarted after the agent restart: %+v", ts)
	}
}

func TestE2EBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, t.TempDir())

	t.Run("malformed HCL registers nothing", func(t *testing.T) {
		out, code := a.cli("job", "run", "examples/bad.hcl")
		if code == 0 {
			t.Fatalf("job run of bad.hcl exited 0:\n%s", out)
		}
		if !strings.Contains(out, "bad.hcl:") {
			t.Errorf("error does not name file:line:col:\n%s", out)
		}
		var jobs []*api.JobListStub
		a.getJSON("/v1/jobs", &jobs)
		if len(jobs) != 0 {
			t.Errorf("%d jobs registered after a parse error", len(jobs))
		}
	})

	put := func(t *testing.T, body []byte) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, a.addr+"/v1/jobs", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	jobJSON := func(driver string, gpus int) []byte {
		b, _ := json.Marshal(map[string]interface{}{"Job": map[string]interface{}{
			"ID": "bad-" + driver, "Type": "batch",
			"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1, "Tasks": []interface{}{map[string]interface{}{
				"Name": "t", "Driver": driver, "Config": map[string]interface{}{"command": "/bin/true"},
				"Resources": map[string]interface{}{"CPU": 100, "MemoryMB": 64, "Devices": []interface{}{map[string]interface{}{"Name": "nvidia/gpu", "Count": gpus}}},
			}}}},
		}})
		return b
	}
	for _, tc := range []struct {
		name string
		body []byte
		code int
		want string
	}{
		{"unknown driver", jobJSON("qemu", 1), 400, "driver"},
		{"zero GPUs", jobJSON("native", 0), 400, "count"},
		{"negative GPUs", jobJSON("native", -2), 400, "count"},
		{"memory not a number", []byte(`{"Job":{"ID":"m","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"native","Resources":{"MemoryMB":"lots"}}]}]}}`), 400, "MemoryMB"},
		{"body over 1 MiB", append(append([]byte(`{"Job":{"ID":"x","Meta":{"k":"`), bytes.Repeat([]byte("a"), 1<<20+10)...), []byte(`"}}}`)...), 413, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := put(t, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("PUT /v1/jobs = %d %s, want %d mentioning %q", code, body, tc.code, tc.want)
			}
			if !strings.HasPrefix(strings.TrimSpace(body), "{") {
				t.Errorf("error body is not JSON: %s", body)
			}
		})
	}

	t.Run("unknown route is a JSON 404", func(t *testing.T) {
		resp, err := http.Get(a.addr + "/v1/no/such/route")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e map[string]interface{}
		if resp.StatusCode != 404 || json.Unmarshal(b, &e) != nil {
			t.Errorf("got %d %s", resp.StatusCode, b)
		}
	})

	t.Run("missing command fails the allocation, not the agent", func(t *testing.T) {
		dir := t.TempDir()
		hcl := `job "no-such-cmd" {
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "t" {
      driver = "native"
      config {
        command = "/definitely/not/here"
      }
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
`
		path := filepath.Join(dir, "missing.hcl")
		if err := os.WriteFile(path, []byte(hcl), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := a.cli("job", "run", "-detach", path)
		alloc := a.waitAllocStatus("no-such-cmd", structs.AllocClientStatusFailed, structs.AllocClientStatusComplete)
		if alloc.ClientStatus != structs.AllocClientStatusFailed {
			t.Fatalf("allocation is %s, want failed (job run said %s)", alloc.ClientStatus, out)
		}
		found := false
		for _, ev := range alloc.TaskStates["t"].Events {
			if strings.Contains(ev.DisplayMessage+ev.Message, "/definitely/not/here") {
				found = true
			}
		}
		if !found {
			t.Errorf("no task event names the missing command: %+v", alloc.TaskStates["t"].Events)
		}
		resp, err := http.Get(a.addr + "/v1/status/health")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("agent unhealthy after a failed task: %v", err)
		}
		resp.Body.Close()
	})
}
