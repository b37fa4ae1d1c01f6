package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// waitLeader polls addr until its cluster has a leader, or fails the test
// after the deadline.
func waitLeader(t *testing.T, addr string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: addr, Token: api.EnvToken()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := c.Status().Leader()
		if err == nil && l != "" {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader within 30s (last: %q, %v)", l, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJobPlanAndRunCheckDriverConfig runs job plan and job run against a
// real server agent (whose drivers registered their config validators)
// with task configs the drivers refuse: each exits 1 naming the group,
// task and key, and nothing is registered.
func TestJobPlanAndRunCheckDriverConfig(t *testing.T) {
	addr := startServerAgent(t, "srv-cfg")
	client := waitLeader(t, addr)
	spec := func(config, resources string) string {
		return `job "cfg" {
  type = "service"
  group "g" {
    task "t" {
      driver = "native"
      config {
        ` + config + `
      }
      ` + resources + `
    }
  }
}
`
	}
	cases := []struct {
		name, config, resources, want string
	}{
		{"cpu_hard_limit a string", `command = "/bin/sleep"
        cpu_hard_limit = "yes"`, "", `group "g": task "t": config: key "cpu_hard_limit" must be true or false, got a string "yes"`},
		{"unknown key", `comand = "x"
        command = "/bin/true"`, "", `group "g": task "t": config: unknown key "comand"`},
		{"args numbers", `command = "/bin/echo"
        args = [1, 2]`, "", `group "g": task "t": config: key "args": element 0 must be a string, got a number 1`},
		{"cpu_hard_limit with cpu = 0", `command = "/bin/true"
        cpu_hard_limit = true`, `resources {
        cpu    = 0
        memory = 32
      }`, `config: key "cpu_hard_limit" is true but the task's resources set no cpu`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cfg.hcl")
			if err := os.WriteFile(path, []byte(spec(tc.config, tc.resources)), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, verb := range [][]string{{"job", "plan", path}, {"job", "run", "-detach", path}} {
				r := runCmd(t, addr, verb...)
				if r.code != 1 || !strings.Contains(r.err, tc.want) {
					t.Errorf("%s: exit %d, stderr %q; want 1 naming %q", strings.Join(verb[:2], " "), r.code, r.err, tc.want)
				}
				if strings.Contains(r.err, "float64") || strings.Contains(r.err, "interface") {
					t.Errorf("%s: stderr %q names a Go type", strings.Join(verb[:2], " "), r.err)
				}
			}
			jobs, _, err := client.Jobs().List(nil)
			if err != nil || len(jobs) != 0 {
				t.Fatalf("case %d: jobs after refused submits: %d (%v)", i, len(jobs), err)
			}
		})
	}
}
