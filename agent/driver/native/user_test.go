package native

import (
	"bytes"
	"context"
	"errors"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
)

// reachable opens every directory above dir to other users' search (not
// listing), as a client data directory must be for tasks that run as
// another user.
func reachable(t *testing.T, dir string) {
	t.Helper()
	for p := filepath.Dir(dir); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunAsUser(t *testing.T) {
	d := newPolicyTestDriver(t, UserPolicy{AllowedUsers: []string{"nobody-such-user-xyz"}})
	cfg := shimTask(t, "as-user", "id -u; pwd; touch local/x && echo wrote")
	cfg.Config["user"] = "nobody-such-user-xyz"
	if os.Geteuid() == 0 {
		if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `user "nobody-such-user-xyz"`) {
			t.Fatalf("unknown user: %v", err)
		}
	}
	cfg.Config["user"] = ""
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `key "user"`) {
		t.Fatalf("empty user: %v", err)
	}
	cfg.Config["user"] = "nobody"
	cfg.User = "daemon"
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("task user and config user differ: %v", err)
	}
	cfg.User = ""
	if os.Geteuid() != 0 {
		if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "needs the agent to run as root") {
			t.Fatalf("another user without root: %v", err)
		}
		t.Skip("running as another user needs root")
	}
	if err := os.MkdirAll(cfg.TaskDir+"/local", 0o700); err != nil {
		t.Fatal(err)
	}
	// The test's temporary directories are 0700: the user cannot reach
	// the task directory, and the error says which directory blocks it.
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot enter") {
		t.Fatalf("unreachable task dir: %v", err)
	}
	reachable(t, cfg.TaskDir)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d, cfg.ID, 10*time.Second)
	out := readLog(t, cfg, "stdout")
	if r.ExitCode != 0 || !strings.HasPrefix(out, "65534\n") || !strings.Contains(out, "wrote") {
		t.Fatalf("exit %+v output %q: want uid 65534 writing in its task directory", r, out)
	}
	// The log files stay the agent's.
	fi, err := os.Stat(filepath.Join(cfg.LogDir, "main.stdout.0"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Fatalf("log file owned by uid %d, want the agent's 0", uid)
	}
}

// TestExploitNativeTaskRunsAsRoot: an agent running as root ran every
// native task as root. A task now runs as "nobody" unless it names a user
// the client allows, root included; alloc exec runs as the task's user too.
func TestExploitNativeTaskRunsAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the default task user applies to an agent running as root")
	}
	d := newPolicyTestDriver(t, UserPolicy{})
	cfg := shimTask(t, "default-user", `id -u; touch written-by-task; sleep 30`)
	reachable(t, cfg.TaskDir)
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 10*time.Second, "the task printed a line", func() bool { return strings.Contains(readLog(t, cfg, "stdout"), "\n") })
	if out := readLog(t, cfg, "stdout"); out != "65534\n" {
		t.Fatalf("task runs as uid %q, want nobody (65534)", strings.TrimSpace(out))
	}
	waittest.Until(t, 5*time.Second, "written-by-task exists", func() bool { _, err := os.Stat(filepath.Join(cfg.TaskDir, "written-by-task")); return err == nil })
	fi, err := os.Stat(filepath.Join(cfg.TaskDir, "written-by-task"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Fatalf("the task's file is owned by root")
	}
	var out bytes.Buffer
	code, err := d.ExecTask(context.Background(), cfg.ID, &driver.ExecOptions{Cmd: []string{"id", "-u"}, Stdout: &out})
	if err != nil || code != 0 || strings.TrimSpace(out.String()) != "65534" {
		t.Fatalf("alloc exec ran as uid %q (code %d, err %v), want the task's nobody", strings.TrimSpace(out.String()), code, err)
	}
	if err := d.StopTask(cfg.ID, time.Second, "SIGKILL"); err != nil {
		t.Fatal(err)
	}

	for _, asRoot := range []func(c *driver.TaskConfig){
		func(c *driver.TaskConfig) { c.User = "root" },
		func(c *driver.TaskConfig) { c.Config["user"] = "root" },
	} {
		rc := shimTask(t, "as-root", "id -u")
		asRoot(rc)
		if _, err := d.StartTask(rc); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `user "root" is not allowed`) {
			t.Fatalf("user root without the client allowing it: %v", err)
		}
	}

	// The client may allow root explicitly.
	allowing := newPolicyTestDriver(t, UserPolicy{AllowedUsers: []string{"root"}})
	rc := shimTask(t, "allowed-root", "id -u")
	rc.User = "root"
	if _, err := allowing.StartTask(rc); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, allowing, rc.ID, 10*time.Second); r.ExitCode != 0 || readLog(t, rc, "stdout") != "0\n" {
		t.Fatalf("allowed root: %+v %q", r, readLog(t, rc, "stdout"))
	}
}
