package native

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
)

func TestRunAsUser(t *testing.T) {
	d := newTestDriver(t)
	cfg := shimTask(t, "as-user", "id -u; pwd; touch local/x && echo wrote")
	cfg.Config["user"] = "nobody-such-user-xyz"
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `user "nobody-such-user-xyz"`) {
		t.Fatalf("unknown user: %v", err)
	}
	cfg.Config["user"] = ""
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `key "user"`) {
		t.Fatalf("empty user: %v", err)
	}
	if os.Geteuid() != 0 {
		cfg.Config["user"] = "nobody"
		if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "needs the agent to run as root") {
			t.Fatalf("another user without root: %v", err)
		}
		t.Skip("running as another user needs root")
	}
	if err := os.MkdirAll(cfg.TaskDir+"/local", 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Config["user"] = "nobody"
	// The test's temporary directories are 0700: the user cannot reach
	// the task directory, and the error says which directory blocks it.
	if _, err := d.StartTask(cfg); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot enter") {
		t.Fatalf("unreachable task dir: %v", err)
	}
	for p := filepath.Dir(cfg.TaskDir); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, d, cfg.ID, 10*time.Second)
	out := readLog(t, cfg, "stdout")
	if r.ExitCode != 0 || !strings.HasPrefix(out, "65534\n") || !strings.Contains(out, "wrote") {
		t.Fatalf("exit %+v output %q: want uid 65534 writing in its task directory", r, out)
	}
}
