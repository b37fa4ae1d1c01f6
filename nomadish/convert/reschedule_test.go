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
      delay    = "1m30s"
      delay_function = "exponential"
      max_delay      = "10m"
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
	if rp == nil || rp.Attempts != 2 || rp.Interval != time.Hour || rp.Unlimited || rp.Delay != 90*time.Second ||
		rp.DelayFunction != "exponential" || rp.MaxDelay != 10*time.Minute {
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
	j.TaskGroups[0].ReschedulePolicy.Attempts = 2
	j.TaskGroups[0].ReschedulePolicy.Delay = -time.Second
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "reschedule: delay") {
		t.Fatalf("negative delay: %v", err)
	}
	// A delay that is not a duration is refused with its position.
	badDelay := strings.Replace(src, `delay    = "1m30s"`, `delay    = "soon"`, 1)
	if _, err := jobspec.Parse("r.hcl", []byte(badDelay), nil); err == nil || !strings.Contains(err.Error(), "r.hcl:7:") {
		t.Fatalf("bad delay: %v", err)
	}
	badMax := strings.Replace(src, `max_delay      = "10m"`, `max_delay      = 10`, 1)
	if _, err := jobspec.Parse("r.hcl", []byte(badMax), nil); err == nil || !strings.Contains(err.Error(), "r.hcl:9:") {
		t.Fatalf("bad max_delay: %v", err)
	}
	j.TaskGroups[0].ReschedulePolicy.Delay = time.Second
	j.TaskGroups[0].ReschedulePolicy.DelayFunction = "fibonacci"
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "reschedule: delay_function") {
		t.Fatalf("unknown delay_function: %v", err)
	}
	// An unknown key in the block is refused with its position.
	bad := strings.Replace(src, "attempts = 2", "attemps = 2", 1)
	if _, err := jobspec.Parse("r.hcl", []byte(bad), nil); err == nil || !strings.Contains(err.Error(), "attemps") || !strings.Contains(err.Error(), "r.hcl:5") {
		t.Fatalf("unknown key: %v", err)
	}
}
