package native

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
)

// ignoredSignals returns the SigIgn mask of process pid (bit n-1 set when
// signal n is ignored), from /proc/<pid>/status.
func ignoredSignals(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("SigIgn %q: %v", v, err)
			}
			return m
		}
	}
	t.Fatalf("no SigIgn in /proc/%d/status", pid)
	return 0
}

// TestTaskGetsSignalsTheAgentIgnores: an agent started with SIGHUP and
// SIGINT ignored (under nohup, or by a non-interactive shell's `&`) starts
// tasks that have neither ignored, so a shell task can trap them and a
// kill_signal of SIGINT stops the task through its trap instead of
// waiting out the kill timeout.
func TestTaskGetsSignalsTheAgentIgnores(t *testing.T) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	t.Cleanup(func() { signal.Reset(syscall.SIGHUP, syscall.SIGINT) })
	d := newTestDriver(t) // after the Ignore: its idle shim inherits it
	cfg := shimTask(t, "shim-unignore", `trap 'echo got INT; exit 0' INT; echo ready; while :; do sleep 0.05; done`)
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, `"ready" in stdout`, func() bool { return strings.Contains(readLog(t, cfg, "stdout"), "ready") })
	if ign := ignoredSignals(t, h.PID); ign&(1<<(syscall.SIGHUP-1)) != 0 || ign&(1<<(syscall.SIGINT-1)) != 0 {
		t.Fatalf("task pid %d ignores signals %#x: SIGHUP or SIGINT inherited ignored from the agent", h.PID, ign)
	}
	start := time.Now()
	if err := d.StopTask(cfg.ID, 10*time.Second, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d, cfg.ID, 15*time.Second)
	if r.ExitCode != 0 || r.Signal != 0 || !strings.Contains(readLog(t, cfg, "stdout"), "got INT") {
		t.Fatalf("stop with SIGINT after %s: result %+v, stdout %q: want the task's INT trap to end it", time.Since(start), r, readLog(t, cfg, "stdout"))
	}
}
