package agent_test

import (
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestE2EAllocActions drives the alloc and node action commands against a
// real dev agent: alloc exec shows the task's GPU variables and passes its
// exit code through, alloc signal and restart reach the task, alloc logs
// -tail -n prints the last lines, and node drain -self stops what cannot
// move (one node) at the deadline.
func TestE2EAllocActions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, t.TempDir())
	hcl := `job "svc" {
  type = "service"
  group "g" {
    task "main" {
      driver = "native"
      kill_timeout = "2s"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got HUP' HUP; echo line1; echo line2; echo line3; while :; do sleep 0.05; done"]
      }
      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}`
	p := filepath.Join(t.TempDir(), "svc.hcl")
	if err := os.WriteFile(p, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", p); code != 0 {
		t.Fatalf("job run: %d\n%s", code, out)
	}
	alloc := a.waitAllocStatus("svc", structs.AllocClientStatusRunning)
	ids := alloc.DeviceIDs()
	if len(ids) != 1 {
		t.Fatalf("devices %v", ids)
	}
	waittest.For(t, 10*time.Second, "task output", func() (bool, string) {
		out := a.logs(alloc.ID, "main")
		return strings.Contains(out, "line3"), out
	})

	out, code := a.cli("alloc", "exec", alloc.ID, "env")
	if code != 0 || !strings.Contains(out, "CUDA_VISIBLE_DEVICES="+ids[0]) || !strings.Contains(out, "NVIDIA_VISIBLE_DEVICES="+ids[0]) || !strings.Contains(out, "GPULAYER_GPU_COUNT=1") {
		t.Fatalf("alloc exec env: exit %d\n%s", code, out)
	}
	if _, code := a.cli("alloc", "exec", alloc.ID, "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("alloc exec exit code %d, want 3", code)
	}
	if out, code := a.cli("alloc", "exec", "-t", alloc.ID, "sh", "-c", "tty >/dev/null && echo on-a-tty"); code != 0 || !strings.Contains(out, "on-a-tty") {
		t.Fatalf("alloc exec -t: %d %q", code, out)
	}
	// stdin goes to the command by default (Nomad's -i=true); -i=false
	// sends none.
	for _, tc := range []struct {
		flags []string
		want  string
	}{{nil, "from-stdin"}, {[]string{"-i=false"}, ""}} {
		cmd := exec.Command(a.bin, append(append([]string{"alloc", "exec"}, tc.flags...), alloc.ID, "sh", "-c", "cat; echo end")...)
		cmd.Env = append(os.Environ(), "GPULAYER_ADDR="+a.addr)
		cmd.Stdin = strings.NewReader("from-stdin\n")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != strings.TrimPrefix(tc.want+"\nend\n", "\n") {
			t.Fatalf("alloc exec %v with stdin: %v %q", tc.flags, err, out)
		}
	}
	if out, code := a.cli("alloc", "exec", alloc.ID); code == 0 {
		t.Fatalf("alloc exec without a command succeeded: %q", out)
	}

	if out, code := a.cli("alloc", "logs", "-tail", "-n", "2", alloc.ID); code != 0 || out != "line2\nline3\n" {
		t.Fatalf("alloc logs -tail -n 2: %d %q", code, out)
	}
	if out, code := a.cli("alloc", "logs", "-n", "0", alloc.ID); code == 0 {
		t.Fatalf("alloc logs -n 0 accepted: %q", out)
	}

	if out, code := a.cli("alloc", "signal", "-s", "HUP", alloc.ID, "main"); code != 0 {
		t.Fatalf("alloc signal: %d %s", code, out)
	}
	waittest.For(t, 10*time.Second, "signal reached the task", func() (bool, string) {
		out := a.logs(alloc.ID, "main")
		return strings.Contains(out, "got HUP"), out
	})
	if out, code := a.cli("alloc", "signal", "-s", "NOPE", alloc.ID); code == 0 || !strings.Contains(out, "NOPE") {
		t.Fatalf("alloc signal with an unknown signal: %d %s", code, out)
	}
	if out, code := a.cli("alloc", "restart", alloc.ID); code != 0 {
		t.Fatalf("alloc restart: %d %s", code, out)
	}
	waittest.For(t, 15*time.Second, "task restarted", func() (bool, string) {
		var al api.Allocation
		a.getJSON("/v1/allocation/"+alloc.ID, &al)
		ts := al.TaskStates["main"]
		return ts != nil && ts.Restarts == 1 && ts.State == structs.TaskStateRunning, fmt.Sprintf("%+v", ts)
	})

	if out, code := a.cli("node", "eligibility", "-disable", "-self"); code != 0 {
		t.Fatalf("node eligibility: %d %s", code, out)
	}
	if out, code := a.cli("node", "drain", "-enable", "-self", "-deadline", "1s"); code != 0 {
		t.Fatalf("node drain: %d %s", code, out)
	}
	// One node: the replacement cannot be placed, so the allocation runs
	// until the deadline and is then stopped.
	waittest.For(t, 20*time.Second, "drain deadline stops the allocation", func() (bool, string) {
		var al api.Allocation
		a.getJSON("/v1/allocation/"+alloc.ID, &al)
		return al.DesiredStatus == structs.AllocDesiredStatusStop && al.ClientTerminalStatus(), al.DesiredStatus + "/" + al.ClientStatus
	})
	if out, code := a.cli("node", "drain", "-enable"); code == 0 {
		t.Fatalf("node drain without a node accepted: %s", out)
	}
}
