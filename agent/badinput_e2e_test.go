package agent_test

import (
	"github.com/gpulayer/gpulayer/nomadish/api"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestE2EBadTaskConfigs is issue 5's "must show 5": a task config with an
// unknown key, a mount outside the allocation directory, a negative
// timeout and a command that is a directory are each refused with a
// message naming it, and a service already running is not disturbed.
// Unknown keys and the negative timeout are refused at submit; the mount
// and the command only on the client.
func TestE2EBadTaskConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, t.TempDir())
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	job := func(name, driver, config, extra string) string {
		return `job "` + name + `" {
  type = "batch"
  group "g" {
    task "main" {
      driver = "` + driver + `"
      ` + extra + `
      config {
        ` + config + `
      }
    }
  }
}`
	}
	good := write("good", strings.Replace(job("good", "native", `command = "/bin/sh"
        args = ["-c", "echo up; exec sleep 300"]`, ""), `type = "batch"`, `type = "service"`, 1))
	if out, code := a.cli("job", "run", "-detach", good); code != 0 {
		t.Fatalf("job run good: %d %s", code, out)
	}
	before := a.waitAllocStatus("good", structs.AllocClientStatusRunning)

	// Refused when the job is submitted, before anything is registered:
	// the message names the field (driver config keys included).
	for _, tc := range []struct {
		name, driver, config, extra, want string
	}{
		{"neg", "native", `command = "/bin/true"`, `kill_timeout = "-5s"`, "kill_timeout: must not be negative"},
		{"unknownkey", "native", `command = "/bin/true"
        comand = "/bin/false"`, "", `task "main": config: unknown key "comand"`},
		{"dockerkey", "docker", `image = "scratch"
        imagee = "x"`, "", `task "main": config: unknown key "imagee"`},
	} {
		out, code := a.cli("job", "run", "-detach", write(tc.name, job(tc.name, tc.driver, tc.config, tc.extra)))
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Fatalf("%s: exit %d, want a refusal naming %q\n%s", tc.name, code, tc.want, out)
		}
		if st := a.getJSON("/v1/job/"+tc.name, nil); st != 404 {
			t.Fatalf("%s: GET /v1/job = %d after a refused submit, want 404", tc.name, st)
		}
	}

	// Refused by the driver on the client, which alone sees its file
	// system: the allocation fails at once with a Driver Failure event
	// naming the mount or command.
	cases := []struct {
		name, driver, config, want string
	}{
		{"mount", "docker", `image = "scratch"
        mounts = [{ source = "/etc", target = "/host-etc" }]`, `mount "/etc" (element 0) is refused`},
		{"dircmd", "native", `command = "/tmp"`, `command "/tmp" is a directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.driver == "docker" {
				dockertest.Require(t)
			}
			if out, code := a.cli("job", "run", "-detach", write(tc.name, job(tc.name, tc.driver, tc.config, ""))); code != 0 {
				t.Fatalf("job run: %d %s", code, out)
			}
			al := a.waitAllocStatus(tc.name, structs.AllocClientStatusFailed, structs.AllocClientStatusComplete)
			if al.ClientStatus != structs.AllocClientStatusFailed {
				t.Fatalf("status %s", al.ClientStatus)
			}
			var msg string
			for _, e := range al.TaskStates["main"].Events {
				if e.Type == structs.TaskEventDriverFailure {
					msg = e.DisplayMessage
				}
			}
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("driver failure %q does not name %q", msg, tc.want)
			}
		})
	}

	// The running service was not disturbed.
	time.Sleep(200 * time.Millisecond)
	var after api.Allocation
	a.getJSON("/v1/allocation/"+before.ID, &after)
	b, aft := before.TaskStates["main"], after.TaskStates["main"]
	if after.ClientStatus != structs.AllocClientStatusRunning || aft.Restarts != 0 || !aft.StartedAt.Equal(b.StartedAt) {
		t.Fatalf("good service changed: %s restarts %d started %s (was %s)", after.ClientStatus, aft.Restarts, aft.StartedAt, b.StartedAt)
	}
}
