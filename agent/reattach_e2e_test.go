package agent_test

import (
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/structs"
)

// startedDetails returns the details of the task's last Started or
// Reattached event, and how many Started events it has.
func startedDetails(a *api.Allocation, task string) (map[string]string, int, bool) {
	ts := a.TaskStates[task]
	if ts == nil {
		return nil, 0, false
	}
	var last map[string]string
	starts, reattached := 0, false
	for _, e := range ts.Events {
		switch e.Type {
		case structs.TaskEventStarted:
			starts++
			last = e.Details
		case "Reattached":
			reattached = true
			last = e.Details
		}
	}
	return last, starts, reattached
}

func (a *devAgent) allocByJob(jobID string) *api.Allocation {
	a.t.Helper()
	var allocs []*api.Allocation
	if code := a.getJSON("/v1/job/"+jobID+"/allocations", &allocs); code != 200 || len(allocs) == 0 {
		return nil
	}
	var full api.Allocation
	if code := a.getJSON("/v1/allocation/"+allocs[0].ID, &full); code != 200 {
		return nil
	}
	return &full
}

func (a *devAgent) logs(allocID, task string) string {
	a.t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/client/fs/logs/%s?task=%s&type=stdout&plain=true", a.addr, allocID, task))
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestE2EReattachAfterKill9 is issue 5's "must show 2": kill -9 the agent
// while a native task and a docker task run, start it again: both keep
// their pid and container ID and finish normally, their logs hold every
// line once, and a batch job that finished before the kill is not run
// again.
func TestE2EReattachAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary and Docker containers")
	}
	image := dockertest.BuildImage(t)
	dataDir := t.TempDir()
	work := taskWorkDir(t)
	a := startDevAgent(t, dataDir)

	once := filepath.Join(work, "once.txt")
	jobs := map[string]string{
		"once": fmt.Sprintf(`job "once" {
  type = "batch"
  group "g" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo ran >> %s"]
      }
    }
  }
}`, once),
		"nat": fmt.Sprintf(`job "nat" {
  type = "batch"
  group "g" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo start; while [ ! -f %s ]; do sleep 0.05; done; echo finish"]
      }
    }
  }
}`, filepath.Join(work, "go-native")),
		"dock": fmt.Sprintf(`job "dock" {
  type = "batch"
  group "g" {
    task "main" {
      driver = "docker"
      config {
        image = %q
        args  = ["waitfile", "/alloc/go"]
      }
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}`, image),
	}
	for _, name := range []string{"once", "nat", "dock"} {
		p := filepath.Join(work, name+".hcl")
		if err := os.WriteFile(p, []byte(jobs[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, code := a.cli("job", "run", "-detach", p); code != 0 {
			t.Fatalf("job run %s exited %d:\n%s", name, code, out)
		}
	}
	if al := a.waitAllocStatus("once", structs.AllocClientStatusComplete, structs.AllocClientStatusFailed); al.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("once: %s %+v", al.ClientStatus, al.TaskStates)
	}
	nat := a.waitAllocStatus("nat", structs.AllocClientStatusRunning)
	dock := a.waitAllocStatus("dock", structs.AllocClientStatusRunning)
	natDetails, _, _ := startedDetails(nat, "main")
	dockDetails, _, _ := startedDetails(dock, "main")
	pid := natDetails["pid"]
	containerID := dockDetails["container_id"]
	if pid == "" || containerID == "" {
		t.Fatalf("started events lack pid %q or container ID %q", pid, containerID)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", containerID).Run() })
	waittest.For(t, 20*time.Second, "both tasks wrote their first line", func() (bool, string) {
		n, d := a.logs(nat.ID, "main"), a.logs(dock.ID, "main")
		return n == "start\n" && d == "ready\n", fmt.Sprintf("native %q docker %q", n, d)
	})

	// kill -9: nothing of the agent runs its shutdown.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	var npid int
	fmt.Sscan(pid, &npid)
	if err := syscall.Kill(npid, 0); err != nil {
		t.Fatalf("native task pid %d died with the agent: %v", npid, err)
	}
	if out, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", containerID).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Fatalf("container %s not running after the agent died: %s %v", containerID, out, err)
	}

	a.start()
	waittest.For(t, 30*time.Second, "both tasks reattached", func() (bool, string) {
		n, d := a.allocByJob("nat"), a.allocByJob("dock")
		if n == nil || d == nil {
			return false, "allocations not listed"
		}
		_, _, rn := startedDetails(n, "main")
		_, _, rd := startedDetails(d, "main")
		return rn && rd, fmt.Sprintf("native reattached %v docker reattached %v", rn, rd)
	})
	// Let both tasks finish.
	if err := os.WriteFile(filepath.Join(work, "go-native"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "client", "allocs", dock.ID, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"nat", "dock"} {
		al := a.waitAllocStatus(job, structs.AllocClientStatusComplete, structs.AllocClientStatusFailed)
		if al.ClientStatus != structs.AllocClientStatusComplete {
			t.Fatalf("%s after reattach: %s %+v\nagent log:\n%s", job, al.ClientStatus, al.TaskStates["main"], a.logText())
		}
		details, starts, reattached := startedDetails(al, "main")
		if starts != 1 || !reattached {
			t.Fatalf("%s: %d Started events, reattached %v: the task was started again", job, starts, reattached)
		}
		if job == "nat" && details["pid"] != pid {
			t.Fatalf("native task pid %s after reattach, want %s", details["pid"], pid)
		}
		if job == "dock" && details["container_id"] != containerID {
			t.Fatalf("docker container %s after reattach, want %s", details["container_id"], containerID)
		}
	}
	if got := a.logs(nat.ID, "main"); got != "start\nfinish\n" {
		t.Errorf("native logs across the restart %q, want each line once", got)
	}
	if got := a.logs(dock.ID, "main"); got != "ready\ndone\n" {
		t.Errorf("docker logs across the restart %q, want each line once", got)
	}
	b, err := os.ReadFile(once)
	if err != nil || string(b) != "ran\n" {
		t.Fatalf("the finished batch job's file holds %q (%v), want one line", b, err)
	}
}
