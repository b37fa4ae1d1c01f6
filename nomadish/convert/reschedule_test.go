package convert

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

func TestReschedulePolicyFromJobspec(t *testing.T) {
	src := `job "r" {
  type = "batch"
  group "g" {
    reschedule {
      attempts = 2
      interval = "1h"
    }
    task "t" {
      driver = "native"
      config { command = "/bin/true" }
    }
  }
}`
	aj, err := jobspec.Parse("r.hcl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	j := JobToStructs(aj)
	rp := j.TaskGroups[0].ReschedulePolicy
	if rp == nil || rp.Attempts != 2 || rp.Interval != time.Hour || rp.Unlimited {
		t.Fatalf("reschedule policy %+v", rp)
	}
	if back := JobFromStructs(j).TaskGroups[0].ReschedulePolicy; back == nil || *back != *aj.TaskGroups[0].ReschedulePolicy {
		t.Fatalf("round trip %+v", back)
	}
	j.Canonicalize()
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	j.TaskGroups[0].ReschedulePolicy.Attempts = -1
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "reschedule: attempts") {
		t.Fatalf("negative attempts: %v", err)
	}
	// An unknown key in the block is refused with its position.
	bad := strings.Replace(src, "attempts = 2", "attemps = 2", 1)
	if _, err := jobspec.Parse("r.hcl", []byte(bad), nil); err == nil || !strings.Contains(err.Error(), "attemps") || !strings.Contains(err.Error(), "r.hcl:5") {
		t.Fatalf("unknown key: %v", err)
	}
}
