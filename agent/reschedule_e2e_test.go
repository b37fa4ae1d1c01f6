package agent_test

import (
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestE2EServiceFailingAtStartWaitsToReschedule is the hostile trial's
// tight loop: a service job without a reschedule block whose task fails
// at start was replaced about every 200 ms. With Nomad's default policy
// the failed allocation is the only one, and a reschedule-later
// evaluation waits until 30 s after the failure.
func TestE2EServiceFailingAtStartWaitsToReschedule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, t.TempDir())
	p := filepath.Join(t.TempDir(), "crash.hcl")
	src := `job "crash" {
  group "g" {
    task "main" {
      driver = "native"
      config {
        command = "/tmp"
      }
    }
  }
}`
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", p); code != 0 {
		t.Fatalf("job run: %d %s", code, out)
	}
	failed := a.waitAllocStatus("crash", structs.AllocClientStatusFailed)
	var later *api.Evaluation
	waittest.For(t, 30*time.Second, "a reschedule-later evaluation", func() (bool, string) {
		var evals []*api.Evaluation
		if code := a.getJSON("/v1/job/crash/evaluations", &evals); code != 200 {
			return false, fmt.Sprintf("status %d", code)
		}
		for _, e := range evals {
			if e.TriggeredBy == structs.EvalTriggerRescheduleLater {
				later = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d evals", len(evals))
	})
	if got := time.Duration(later.WaitUntil.UnixNano() - failed.ModifyTime); got != 30*time.Second {
		t.Fatalf("reschedule-later waits %s after the failure, want 30s", got)
	}
	var allocs []*api.Allocation
	if code := a.getJSON("/v1/job/crash/allocations", &allocs); code != 200 || len(allocs) != 1 {
		t.Fatalf("allocations: status %d, %d of them, want only the failed one", code, len(allocs))
	}
	var job structs.Job
	if code := a.getJSON("/v1/job/crash", &job); code != 200 || job.TaskGroups[0].ReschedulePolicy == nil ||
		*job.TaskGroups[0].ReschedulePolicy != *structs.DefaultReschedulePolicy(structs.JobTypeService) {
		t.Fatalf("job's reschedule policy %+v, want the service default", job.TaskGroups[0].ReschedulePolicy)
	}
}
