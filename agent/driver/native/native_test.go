package native

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
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

func shTask(t *testing.T, id, script string, env map[string]string) (*driver.TaskConfig, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	return &driver.TaskConfig{
		ID:      id,
		Name:    id,
		Config:  map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", script}},
		Env:     env,
		TaskDir: t.TempDir(),
		Stdout:  out,
		Stderr:  out,
	}, out
}

func waitResult(t *testing.T, d *Driver, id string, within time.Duration) *driver.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ch, err := d.WaitTask(ctx, id)
	if err != nil {
		t.Fatalf("WaitTask: %v", err)
	}
	r, ok := <-ch
	if !ok {
		t.Fatalf("task %s did not exit within %s", id, within)
	}
	return r
}

func TestExitCodesAndSignals(t *testing.T) {
	cases := []struct {
		name   string
		script string
		code   int
		signal int
	}{
		{"success", "exit 0", 0, 0},
		{"exit 3", "exit 3", 3, 0},
		{"exit 255", "exit 255", 255, 0},
		{"killed by SIGKILL", "kill -9 $$", -1, int(syscall.SIGKILL)},
		{"killed by SIGTERM", "kill -TERM $$", -1, int(syscall.SIGTERM)},
	}
	d := newTestDriver(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := shTask(t, tc.name, tc.script, nil)
			if _, err := d.StartTask(cfg); err != nil {
				t.Fatalf("StartTask: %v", err)
			}
			r := waitResult(t, d, cfg.ID, 10*time.Second)
			if r.ExitCode != tc.code || r.Signal != tc.signal {
				t.Fatalf("got exit %d signal %d, want exit %d signal %d", r.ExitCode, r.Signal, tc.code, tc.signal)
			}
			if got := r.Successful(); got != (tc.code == 0 && tc.signal == 0) {
				t.Fatalf("Successful() = %v", got)
			}
			st, err := d.InspectTask(cfg.ID)
			if err != nil || st.State != driver.TaskStateExited {
				t.Fatalf("InspectTask = %+v, %v; want exited", st, err)
			}
			if err := d.DestroyTask(cfg.ID); err != nil {
				t.Fatalf("DestroyTask: %v", err)
			}
			if _, err := d.InspectTask(cfg.ID); !errors.Is(err, driver.ErrTaskNotFound) {
				t.Fatalf("InspectTask after destroy: %v, want ErrTaskNotFound", err)
			}
		})
	}
}

func TestEnvIsExactlyWhatIsPassed(t *testing.T) {
	t.Setenv("GPULAYER_HOST_SECRET", "leak")
	d := newTestDriver(t)
	cfg, out := shTask(t, "env", "env", map[string]string{"FOO": "bar baz", "CUDA_VISIBLE_DEVICES": "GPU-1"})
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, d, cfg.ID, 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	got := out.String()
	for _, want := range []string{"FOO=bar baz\n", "CUDA_VISIBLE_DEVICES=GPU-1\n", "PATH=" + DefaultPath + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("env output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "GPULAYER_HOST_SECRET") {
		t.Errorf("host environment leaked into the task:\n%s", got)
	}
}

func TestWorkingDirIsTaskDir(t *testing.T) {
	d := newTestDriver(t)
	cfg, out := shTask(t, "pwd", "pwd", nil)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	waitResult(t, d, cfg.ID, 10*time.Second)
	want, _ := filepath.EvalSymlinks(cfg.TaskDir)
	if got := strings.TrimSpace(out.String()); got != want && got != cfg.TaskDir {
		t.Fatalf("pwd = %q, want %q", got, cfg.TaskDir)
	}
}

func pidAlive(pid int) bool {
	_, state, err := procStat(pid)
	return err == nil && state != 'Z'
}

func TestStopKillsProcessGroup(t *testing.T) {
	d := newTestDriver(t)
	// The shell starts a child sleep, prints its pid and ignores SIGTERM,
	// so the stop has to escalate to SIGKILL for the whole group.
	cfg, out := shTask(t, "group", "trap '' TERM; sleep 60 & echo child=$!; wait", nil)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		for _, line := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "child="); ok {
				child, _ = strconv.Atoi(v)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatalf("no child pid printed: %q", out.String())
	}
	start := time.Now()
	if err := d.StopTask(cfg.ID, 300*time.Millisecond, "SIGTERM"); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("StopTask returned after %s, before the kill timeout although TERM was ignored", el)
	}
	r := waitResult(t, d, cfg.ID, 5*time.Second)
	if r.Signal != int(syscall.SIGKILL) {
		t.Errorf("signal = %d, want SIGKILL", r.Signal)
	}
	deadline = time.Now().Add(5 * time.Second)
	for pidAlive(child) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if pidAlive(child) {
		t.Fatalf("child sleep %d survived the group kill", child)
	}
}

func TestStopWithSignalHonoured(t *testing.T) {
	d := newTestDriver(t)
	cfg, out := shTask(t, "term", "echo ready; exec sleep 60", nil)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	// Signal only once the shell is past its start-up.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := d.StopTask(cfg.ID, 10*time.Second, "INT"); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d, cfg.ID, time.Second)
	if r.Signal != int(syscall.SIGINT) {
		t.Fatalf("signal = %d, want SIGINT", r.Signal)
	}
	if err := d.StopTask(cfg.ID, 0, ""); err != nil {
		t.Fatalf("stopping an exited task: %v", err)
	}
	if err := d.StopTask("nope", 0, ""); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("StopTask unknown: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		config map[string]interface{}
		want   string
	}{
		{"missing command key", map[string]interface{}{"args": []interface{}{"x"}}, `"command" is required`},
		{"unknown key", map[string]interface{}{"command": "/bin/true", "image": "x"}, `unknown key "image"`},
		{"command not found", map[string]interface{}{"command": "/no/such/binary"}, `"/no/such/binary" not found`},
		{"bare command not in PATH", map[string]interface{}{"command": "no-such-binary-xyz"}, `"no-such-binary-xyz" not found`},
		{"command is a directory", map[string]interface{}{"command": dir}, "is a directory"},
		{"command not executable", map[string]interface{}{"command": notExec}, "not executable"},
		{"args not strings", map[string]interface{}{"command": "/bin/true", "args": []interface{}{1}}, `"args": element 0`},
		{"command not a string", map[string]interface{}{"command": 7}, `"command" must be a non-empty string`},
	}
	d := newTestDriver(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.StartTask(&driver.TaskConfig{ID: tc.name, Config: tc.config, TaskDir: t.TempDir()})
			if err == nil {
				t.Fatal("StartTask succeeded")
			}
			if !errors.Is(err, driver.ErrInvalidConfig) || !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalidConfig and structs.ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if _, err := d.InspectTask(tc.name); !errors.Is(err, driver.ErrTaskNotFound) {
				t.Errorf("failed start left a task behind: %v", err)
			}
		})
	}
}

func TestDuplicateAndDestroyRunning(t *testing.T) {
	d := newTestDriver(t)
	cfg, _ := shTask(t, "dup", "sleep 60", nil)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.StopTask(cfg.ID, time.Second, "SIGKILL") })
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrTaskExists) {
		t.Fatalf("second StartTask: %v, want ErrTaskExists", err)
	}
	if err := d.DestroyTask(cfg.ID); !errors.Is(err, driver.ErrTaskRunning) {
		t.Fatalf("DestroyTask running: %v, want ErrTaskRunning", err)
	}
}

func TestRecoverTask(t *testing.T) {
	d := newTestDriver(t)
	cfg, _ := shTask(t, "rec", "sleep 60", nil)
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.StartTime == 0 {
		t.Fatal("handle has no start time from /proc")
	}
	// A second driver (a restarted client) finds the same process.
	d2 := newTestDriver(t)
	if err := d2.RecoverTask(h, nil); err != nil {
		t.Fatalf("RecoverTask live: %v", err)
	}
	reused := *h
	reused.ID = "reused"
	reused.StartTime = h.StartTime + 1
	if err := d2.RecoverTask(&reused, nil); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("RecoverTask with another start time: %v, want ErrTaskNotFound", err)
	}
	if err := d2.StopTask(h.ID, time.Second, "SIGKILL"); err != nil {
		t.Fatalf("StopTask recovered: %v", err)
	}
	waitResult(t, d, cfg.ID, 5*time.Second)
	if err := d2.RecoverTask(&driver.TaskHandle{ID: "gone", PID: h.PID, StartTime: h.StartTime}, nil); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("RecoverTask of exited process: %v, want ErrTaskNotFound", err)
	}
}

func TestWaitTaskContextCancel(t *testing.T) {
	d := newTestDriver(t)
	cfg, _ := shTask(t, "ctx", "sleep 60", nil)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.StopTask(cfg.ID, time.Second, "SIGKILL") })
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := d.WaitTask(ctx, cfg.ID)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case r, ok := <-ch:
		if ok {
			t.Fatalf("got result %+v from a cancelled wait", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after cancel")
	}
	if _, err := d.WaitTask(context.Background(), "nope"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("WaitTask unknown: %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	fp := newTestDriver(t).Fingerprint()
	if !fp.Detected || !fp.Healthy || fp.Attributes["driver.native.version"] != Version {
		t.Fatalf("fingerprint %+v", fp)
	}
}
