package native

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
)

// TestInspectReportsResolvedCommand: InspectTask names the file the driver
// resolved the command to (a bare name through PATH), which is what an
// endpoint member's binary digest is taken from.
func TestInspectReportsResolvedCommand(t *testing.T) {
	want, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	d := newTestDriver(t)
	cfg := &driver.TaskConfig{ID: "resolve", Name: "resolve", TaskDir: t.TempDir(),
		Config: map[string]interface{}{"command": "sleep", "args": []interface{}{"30"}},
		Env:    map[string]string{"PATH": filepath.Dir(want)}}
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.StopTask(cfg.ID, time.Second, "SIGKILL"); _ = d.DestroyTask(cfg.ID) })
	st, err := d.InspectTask(cfg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Executable != want {
		t.Fatalf("Executable = %q, want %q", st.Executable, want)
	}
}

// TestTaskGoneProvesTheGroupIsEmpty: while a task (and a child it forked
// into its group) runs, TaskGone refuses; after StopTask it proves the
// process group empty.
func TestTaskGoneProvesTheGroupIsEmpty(t *testing.T) {
	d := newTestDriver(t)
	cfg, _ := shTask(t, "gone", "sleep 60 & sleep 60", nil)
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.TaskGone(h); err == nil {
		t.Fatal("TaskGone = nil for a running task")
	}
	if err := d.StopTask(cfg.ID, 2*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := d.TaskGone(h)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TaskGone after stop: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.DestroyTask(cfg.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.TaskGone(&driver.TaskHandle{}); err == nil {
		t.Fatal("TaskGone = nil for a handle without a pid")
	}
}
