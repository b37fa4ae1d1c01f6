package jobspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const shutdownDelaySrc = `job "j" {
  group "g" {
    shutdown_delay = %s
    task "t" {
      driver         = "native"
      shutdown_delay = %s
    }
  }
}
`

func shutdownDelayJobSrc(group, task string) string {
	return strings.Replace(strings.Replace(shutdownDelaySrc, "%s", group, 1), "%s", task, 1)
}

// TestParseShutdownDelay reads a group's and a task's shutdown_delay as
// durations; zero and null leave them unset.
func TestParseShutdownDelay(t *testing.T) {
	job, err := Parse("job.hcl", []byte(shutdownDelayJobSrc(`"30s"`, `"1m5s"`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	if tg.ShutdownDelay != 30*time.Second || tg.Tasks[0].ShutdownDelay != 65*time.Second {
		t.Fatalf("group %s task %s, want 30s and 1m5s", tg.ShutdownDelay, tg.Tasks[0].ShutdownDelay)
	}
	for _, v := range []string{"null", `"0s"`} {
		job, err = Parse("job.hcl", []byte(shutdownDelayJobSrc(v, v)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if job.TaskGroups[0].ShutdownDelay != 0 || job.TaskGroups[0].Tasks[0].ShutdownDelay != 0 {
			t.Fatalf("%s shutdown_delay set %+v", v, job.TaskGroups[0])
		}
	}
}

// TestParseShutdownDelayBad refuses negative, unparseable and mistyped
// durations, each naming the attribute at file:line:col.
func TestParseShutdownDelayBad(t *testing.T) {
	cases := []struct {
		name, group, task string
		want              []string
	}{
		{"negative group", `"-1s"`, "null", []string{"bad.hcl:3:22: Invalid shutdown_delay", `"shutdown_delay" must be a duration of zero or more`, "got -1s"}},
		{"negative task", "null", `"-3ms"`, []string{"bad.hcl:6:24: Invalid shutdown_delay", "got -3ms"}},
		{"unparseable", `"later"`, "null", []string{"bad.hcl:3:22: Invalid duration", `"shutdown_delay"`}},
		{"no unit", "null", "10", []string{"bad.hcl:6:24: Invalid duration", `"shutdown_delay"`, "missing unit"}},
		{"an object", `{ a = 1 }`, "null", []string{"bad.hcl:3:22: Incorrect attribute value type", `"shutdown_delay"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.hcl", []byte(shutdownDelayJobSrc(tc.group, tc.task)), nil)
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestPositionsShutdownDelay maps the server's shutdown_delay problems
// (structs/shutdown_delay.go names them so) to the attribute's line.
func TestPositionsShutdownDelay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.hcl")
	if err := os.WriteFile(path, []byte(shutdownDelayJobSrc(`"2h"`, `"3h"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, pos, err := ParseFileWithPositions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := "invalid job:\n  * group \"g\": shutdown_delay: at most 1h0m0s, got 2h0m0s\n  * group \"g\": task \"t\": shutdown_delay: at most 1h0m0s, got 3h0m0s"
	got, ok := pos.Annotate(msg)
	if !ok {
		t.Fatalf("Annotate refused %q", msg)
	}
	for _, w := range []string{path + `:3:5: group "g": shutdown_delay`, path + `:6:7: group "g": task "t": shutdown_delay`} {
		if !strings.Contains(got, w) {
			t.Errorf("Annotate = %q, lacks %q", got, w)
		}
	}
}
