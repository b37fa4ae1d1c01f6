package docker

import (
	"bytes"
	"context"
	"errors"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/structs"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newDriver(t *testing.T) *Driver {
	t.Helper()
	d, err := New(Config{PullTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testTask returns a task config running the test image with args.
func testTask(t *testing.T, name string, args ...string) (*driver.TaskConfig, *syncBuffer, *syncBuffer) {
	t.Helper()
	alloc := t.TempDir()
	taskDir := filepath.Join(alloc, "main")
	logDir := filepath.Join(taskDir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	id := structs.GenerateUUID()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	argv := make([]interface{}, len(args))
	for i, a := range args {
		argv[i] = a
	}
	return &driver.TaskConfig{
		ID: id + "/main", AllocID: id, JobName: "docker-" + name, TaskGroup: "g", Name: "main",
		Config:  map[string]interface{}{"image": dockertest.Image, "args": argv},
		Env:     map[string]string{"GREETING": "hello", "GPULAYER_ALLOC_ID": id, "NVIDIA_VISIBLE_DEVICES": "void"},
		TaskDir: taskDir, LogDir: logDir, Stdout: out, Stderr: errOut,
		Resources: &structs.AllocatedTaskResources{CPU: 300, MemoryMB: 48},
	}, out, errOut
}

func wait(t *testing.T, d *Driver, id string, within time.Duration) *driver.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ch, err := d.WaitTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := <-ch
	if !ok {
		t.Fatalf("task %s did not exit within %s", id, within)
	}
	return r
}

func TestDockerFingerprint(t *testing.T) {
	dockertest.Require(t)
	fp := newDriver(t).Fingerprint()
	if !fp.Detected || !fp.Healthy || fp.Attributes["driver.docker.version"] == "" {
		t.Fatalf("fingerprint %+v", fp)
	}
	// A host without Docker lacks the driver: not detected, no error.
	d, err := New(Config{Host: "unix://" + filepath.Join(t.TempDir(), "no.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if fp := d.Fingerprint(); fp.Detected || fp.Healthy {
		t.Fatalf("fingerprint without a daemon: %+v", fp)
	}
}

func TestDockerLogsExitEnvLimits(t *testing.T) {
	dockertest.BuildImage(t)
	d := newDriver(t)
	cfg, out, _ := testTask(t, "env", "env", "GREETING", "GPULAYER_ALLOC_ID", "GPULAYER_TASK_DIR", "NVIDIA_VISIBLE_DEVICES")
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.ContainerID == "" {
		t.Fatal("handle without a container ID")
	}
	r := wait(t, d, cfg.ID, 30*time.Second)
	if !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	want := "GREETING=hello\nGPULAYER_ALLOC_ID=" + cfg.AllocID + "\nGPULAYER_TASK_DIR=/alloc/main\nNVIDIA_VISIBLE_DEVICES=void\n"
	if out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	// The container carries its limits and labels until destroyed.
	ins, err := d.api.ContainerInspect(context.Background(), h.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.Container.HostConfig
	if hc.Memory != 48<<20 || hc.CPUShares != 300 || len(hc.DeviceRequests) != 0 {
		t.Fatalf("host config memory %d cpu shares %d device requests %v", hc.Memory, hc.CPUShares, hc.DeviceRequests)
	}
	if l := ins.Container.Config.Labels; l[LabelAllocID] != cfg.AllocID || l[LabelTask] != "main" {
		t.Fatalf("labels %v", l)
	}
	if err := d.DestroyTask(cfg.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.api.ContainerInspect(context.Background(), h.ContainerID, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("container still exists after DestroyTask")
	}

	cfg2, out2, err2 := testTask(t, "exit", "exit", "3")
	if _, err := d.StartTask(cfg2); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, cfg2.ID, 30*time.Second); r.ExitCode != 3 {
		t.Fatalf("exit %+v, want code 3", r)
	}
	if out2.String() != "to stdout\n" || err2.String() != "to stderr\n" {
		t.Fatalf("stdout %q stderr %q", out2.String(), err2.String())
	}
	_ = d.DestroyTask(cfg2.ID)
}

func TestDockerStopSignalArrivesFirst(t *testing.T) {
	dockertest.BuildImage(t)
	d := newDriver(t)
	cfg, out, _ := testTask(t, "signal", "signal")
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	defer d.DestroyTask(cfg.ID)
	waittest.Until(t, 20*time.Second, "task ready", func() bool { return strings.Contains(out.String(), "ready") })
	start := time.Now()
	if err := d.StopTask(cfg.ID, 20*time.Second, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	r := wait(t, d, cfg.ID, 5*time.Second)
	// SIGUSR1 is 10: the program saw it and exited 0 on its own, well
	// before the kill timeout (no SIGKILL, which would give 137).
	if !strings.Contains(out.String(), "got signal 10") || r.ExitCode != 0 {
		t.Fatalf("output %q exit %+v, want the program to report SIGUSR1 and exit 0", out.String(), r)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("stop took %s: the kill timeout, not the signal, ended the task", el)
	}

	// A task that ignores the signal is killed after the timeout.
	cfg2, out2, _ := testTask(t, "sleep", "sleep", "60")
	if _, err := d.StartTask(cfg2); err != nil {
		t.Fatal(err)
	}
	defer d.DestroyTask(cfg2.ID)
	waittest.Until(t, 20*time.Second, "task ready", func() bool { return strings.Contains(out2.String(), "ready") })
	if err := d.StopTask(cfg2.ID, 500*time.Millisecond, "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, cfg2.ID, 5*time.Second); r.ExitCode == 0 {
		t.Fatalf("exit %+v: want the task killed", r)
	}
}

func TestDockerBadImageFailsClearly(t *testing.T) {
	dockertest.Require(t)
	d, err := New(Config{PullTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := testTask(t, "bad", "env")
	cfg.Config["image"] = "gpulayer-test/does-not-exist:nope"
	_, err = d.StartTask(cfg)
	if !errors.Is(err, ErrPullFailed) || !strings.Contains(err.Error(), "no registry can be reached") || !strings.Contains(err.Error(), "does-not-exist") {
		t.Fatalf("error %v, want a pull failure naming the image", err)
	}
	if _, err := d.InspectTask(cfg.ID); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("failed task is still tracked: %v", err)
	}
}

func TestDockerRecoverExecSignal(t *testing.T) {
	dockertest.BuildImage(t)
	d1 := newDriver(t)
	cfg, out, _ := testTask(t, "recover", "signal")
	h, err := d1.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 20*time.Second, "task ready", func() bool { return strings.Contains(out.String(), "ready") })
	waittest.Until(t, 5*time.Second, "log position saved", func() bool { return readSince(cfg) != "" })

	// A new driver (a restarted client) finds the container by ID.
	d2 := newDriver(t)
	out2 := &syncBuffer{}
	cfg2 := *cfg
	cfg2.Stdout = out2
	if err := d2.RecoverTask(h, &cfg2); err != nil {
		t.Fatal(err)
	}
	defer d2.DestroyTask(cfg.ID)
	var execOut bytes.Buffer
	code, err := d2.ExecTask(context.Background(), cfg.ID, &driver.ExecOptions{Cmd: []string{"/prog", "env", "GREETING"}, Stdout: &execOut})
	if err != nil || code != 0 || execOut.String() != "GREETING=hello\n" {
		t.Fatalf("exec: code %d err %v out %q", code, err, execOut.String())
	}
	if err := d2.SignalTask(cfg.ID, "SIGQUIT"); err != nil {
		t.Fatal(err)
	}
	r := wait(t, d2, cfg.ID, 20*time.Second)
	if r.ExitCode != 0 {
		t.Fatalf("exit %+v", r)
	}
	// The recovered stream resumes after what was copied: "ready" is not
	// copied again, the new line is.
	if got := out2.String(); got != "got signal 3\n" {
		t.Fatalf("recovered stdout %q, want only the line written after recovery", got)
	}
	if err := newDriver(t).RecoverTask(&driver.TaskHandle{ID: "x", ContainerID: "0123456789abcdef"}, nil); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover unknown container: %v", err)
	}
}
