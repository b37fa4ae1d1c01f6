package jobspec

import (
	"os"
	"path/filepath"
	"testing"
)

// TestParseTaskUser: a task's user is Nomad's task-level `user`.
func TestParseTaskUser(t *testing.T) {
	p := filepath.Join(t.TempDir(), "user.hcl")
	src := `job "u" {
  group "g" {
    task "t" {
      driver = "native"
      user   = "ml"
      config {
        command = "/bin/true"
      }
    }
  }
}
`
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	job := mustParse(t, p, nil)
	if got := job.TaskGroups[0].Tasks[0].User; got != "ml" {
		t.Fatalf("task user %q, want ml", got)
	}
}
