package jobspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const deadlineSrc = `job "j" {
  type = "batch"
  group "g" {
    max_run_duration = %s
    task "t" {
      driver           = "native"
      max_run_duration = %s
    }
  }
}
`

func deadlineJobSrc(group, task string) string {
	return strings.Replace(strings.Replace(deadlineSrc, "%s", group, 1), "%s", task, 1)
}

// TestParseMaxRunDuration reads a group's and a task's max_run_duration
// as durations; null leaves them unset.
func TestParseMaxRunDuration(t *testing.T) {
	job, err := Parse("job.hcl", []byte(deadlineJobSrc(`"1h30m"`, `"3s"`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	if tg.MaxRunDuration != 90*time.Minute || tg.Tasks[0].MaxRunDuration != 3*time.Second {
		t.Fatalf("group %s task %s, want 1h30m and 3s", tg.MaxRunDuration, tg.Tasks[0].MaxRunDuration)
	}
	job, err = Parse("job.hcl", []byte(deadlineJobSrc("null", "null")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.TaskGroups[0].MaxRunDuration != 0 || job.TaskGroups[0].Tasks[0].MaxRunDuration != 0 {
		t.Fatalf("null max_run_duration set %+v", job.TaskGroups[0])
	}
}

// TestParseMaxRunDurationBad refuses zero, negative, unparseable and
// mistyped durations, each naming the attribute at file:line:col.
func TestParseMaxRunDurationBad(t *testing.T) {
	cases := []struct {
		name, group, task string
		want              []string
	}{
		{"zero group", `"0s"`, "null", []string{"bad.hcl:4:24: Invalid max_run_duration", `"max_run_duration" must be a duration above zero`, "got 0s"}},
		{"negative task", "null", `"-3s"`, []string{"bad.hcl:7:26: Invalid max_run_duration", "got -3s"}},
		{"unparseable", `"soon"`, "null", []string{"bad.hcl:4:24: Invalid duration", `"max_run_duration"`}},
		{"no unit", "null", "3", []string{"bad.hcl:7:26: Invalid duration", `"max_run_duration"`, "missing unit"}},
		{"a list", `["3s"]`, "null", []string{"bad.hcl:4:24: Incorrect attribute value type", `"max_run_duration"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.hcl", []byte(deadlineJobSrc(tc.group, tc.task)), nil)
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

// TestPositionsMaxRunDuration maps the server's max_run_duration problems
// (structs/deadline.go names them so) to the attribute's line.
func TestPositionsMaxRunDuration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.hcl")
	if err := os.WriteFile(path, []byte(deadlineJobSrc(`"1m"`, `"2m"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, pos, err := ParseFileWithPositions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := "invalid job:\n  * group \"g\": max_run_duration: only batch jobs may set it\n  * group \"g\": task \"t\": max_run_duration: only batch jobs may set it"
	got, ok := pos.Annotate(msg)
	if !ok {
		t.Fatalf("Annotate refused %q", msg)
	}
	for _, w := range []string{path + `:4:5: group "g": max_run_duration`, path + `:7:7: group "g": task "t": max_run_duration`} {
		if !strings.Contains(got, w) {
			t.Errorf("Annotate = %q, lacks %q", got, w)
		}
	}
}
