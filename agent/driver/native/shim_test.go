package native

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/internal/waittest"
)

func shimTask(t *testing.T, id, script string) *driver.TaskConfig {
	t.Helper()
	dir := t.TempDir()
	// Registered after TempDir's removal, so it runs before it.
	t.Cleanup(func() { endTask(t, id) })
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return &driver.TaskConfig{
		ID:             id,
		Name:           "main",
		Config:         map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", script}},
		Env:            map[string]string{"GREETING": "hi", "CUDA_VISIBLE_DEVICES": "GPU-1"},
		TaskDir:        dir,
		LogDir:         logDir,
		LogMaxFiles:    5,
		LogMaxFileSize: 1 << 20,
	}
}

func readLog(t *testing.T, cfg *driver.TaskConfig, stream string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg.LogDir, cfg.Name+"."+stream+".0"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShimRunsTaskAndRecordsExit(t *testing.T) {
	d := newTestDriver(t)
	cfg := shimTask(t, "shim-exit", `echo "out $GREETING"; echo err >&2; exit 7`)
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.ShimPID <= 0 || h.ShimPID == h.PID {
		t.Fatalf("handle shim pid %d, task pid %d: want a separate shim", h.ShimPID, h.PID)
	}
	r := waitResult(t, d, cfg.ID, 10*time.Second)
	if r.ExitCode != 7 || r.Err != nil {
		t.Fatalf("exit result %+v, want code 7", r)
	}
	if got := readLog(t, cfg, "stdout"); got != "out hi\n" {
		t.Fatalf("stdout log %q", got)
	}
	if got := readLog(t, cfg, "stderr"); got != "err\n" {
		t.Fatalf("stderr log %q", got)
	}
}

// TestShimTaskSurvivesDriverLoss starts a task, forgets the driver (as a
// killed agent would), and recovers it from its handle with a new driver:
// the task keeps its pid, keeps writing to its log, and its exit code is
// known.
func TestShimTaskSurvivesDriverLoss(t *testing.T) {
	d1 := newTestDriver(t)
	cfg := shimTask(t, "shim-recover", `echo before; while [ ! -f go ]; do sleep 0.05; done; echo after; exit 3`)
	h, err := d1.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, `"before" in stdout`, func() bool { return strings.Contains(readLog(t, cfg, "stdout"), "before") })

	d2 := newTestDriver(t)
	if err := d2.RecoverTask(h, cfg); err != nil {
		t.Fatalf("RecoverTask: %v", err)
	}
	st, err := d2.InspectTask(cfg.ID)
	if err != nil || st.State != driver.TaskStateRunning || st.PID != h.PID {
		t.Fatalf("inspect after recover: %+v %v, want running pid %d", st, err, h.PID)
	}
	if err := os.WriteFile(filepath.Join(cfg.TaskDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d2, cfg.ID, 10*time.Second)
	if r.ExitCode != 3 || r.Err != nil {
		t.Fatalf("recovered exit %+v, want code 3", r)
	}
	if got := readLog(t, cfg, "stdout"); got != "before\nafter\n" {
		t.Fatalf("stdout log %q", got)
	}

	// A task that ended while no driver watched it is known by its exit
	// file; a handle whose shim is gone without one is not found.
	d3 := newTestDriver(t)
	if err := d3.RecoverTask(h, cfg); err != nil {
		t.Fatalf("recover finished task: %v", err)
	}
	if r := waitResult(t, d3, cfg.ID, time.Second); r.ExitCode != 3 {
		t.Fatalf("finished task result %+v", r)
	}
	exitPath := shimExitPath(cfg)
	if err := os.Remove(exitPath); err != nil {
		t.Fatal(err)
	}
	if err := newTestDriver(t).RecoverTask(h, cfg); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover without exit file: %v, want ErrTaskNotFound", err)
	}
}

func TestShimStopSignalAndExec(t *testing.T) {
	d := newTestDriver(t)
	cfg := shimTask(t, "shim-stop", `trap 'echo got HUP' HUP; trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, `"ready" in stdout`, func() bool { return strings.Contains(readLog(t, cfg, "stdout"), "ready") })

	var out bytes.Buffer
	code, err := d.ExecTask(context.Background(), cfg.ID, &driver.ExecOptions{Cmd: []string{"env"}, Stdout: &out})
	if err != nil || code != 0 {
		t.Fatalf("exec env: code %d err %v", code, err)
	}
	if !strings.Contains(out.String(), "CUDA_VISIBLE_DEVICES=GPU-1") || !strings.Contains(out.String(), "GREETING=hi") {
		t.Fatalf("exec env output lacks the task env:\n%s", out.String())
	}
	out.Reset()
	code, err = d.ExecTask(context.Background(), cfg.ID, &driver.ExecOptions{Cmd: []string{"sh", "-c", "tty >/dev/null && echo on-tty; exit 4"}, Tty: true, Stdout: &out})
	if err != nil || code != 4 || !strings.Contains(out.String(), "on-tty") {
		t.Fatalf("exec on tty: code %d err %v out %q", code, err, out.String())
	}
	if _, err := d.ExecTask(context.Background(), cfg.ID, &driver.ExecOptions{}); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("exec without command: %v", err)
	}

	if err := d.SignalTask(cfg.ID, "HUP"); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, `"got HUP" in stdout`, func() bool { return strings.Contains(readLog(t, cfg, "stdout"), "got HUP") })
	if err := d.SignalTask(cfg.ID, "SIGNOPE"); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("unknown signal: %v", err)
	}
	if err := d.StopTask(cfg.ID, 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d, cfg.ID, 5*time.Second)
	if r.ExitCode != 0 || r.Signal != 0 {
		t.Fatalf("stopped task result %+v, want a clean exit after its TERM trap", r)
	}
	if !strings.Contains(readLog(t, cfg, "stdout"), "got TERM") {
		t.Fatalf("TERM did not reach the task: %q", readLog(t, cfg, "stdout"))
	}
	if err := d.SignalTask(cfg.ID, "HUP"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("signal exited task: %v", err)
	}
}

// TestShimImportsNoHeavyPackage: the shim package, whose init runs the
// task shim, imports nothing of this module beyond the driver's leaf
// packages, so a native task's shim starts after a few small packages'
// initialisation instead of the whole binary's (package shim).
func TestShimImportsNoHeavyPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/gpulayer/gpulayer/agent/driver/native/shim").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	allowed := map[string]bool{
		"github.com/gpulayer/gpulayer/agent/driver/allocdir":       true,
		"github.com/gpulayer/gpulayer/agent/driver/logging":        true,
		"github.com/gpulayer/gpulayer/agent/driver/native/cgroups": true,
		"github.com/gpulayer/gpulayer/agent/driver/native/shim":    true,
		"github.com/hashicorp/go-hclog":                            true,
		"github.com/fatih/color":                                   true,
		"github.com/mattn/go-colorable":                            true,
		"github.com/mattn/go-isatty":                               true,
		"golang.org/x/sys/unix":                                    true,
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && !allowed[p] {
			t.Errorf("package shim depends on %s: its initialisation would delay every native task start", p)
		}
	}
}
