package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func updateJob(typ string, u *UpdateStrategy, gpus int) *Job {
	j := &Job{ID: "web", Type: typ, TaskGroups: []*TaskGroup{{Name: "web", Count: 3, Update: u,
		Tasks: []*Task{{Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"}}}}}}
	if gpus > 0 {
		j.TaskGroups[0].Tasks[0].Resources = &Resources{CPU: 100, MemoryMB: 64, Devices: []*RequestedDevice{{Name: "nvidia/gpu", Count: gpus}}}
	}
	j.Canonicalize()
	return j
}

func TestUpdateStrategyDefaults(t *testing.T) {
	cpu := updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1}, 0).TaskGroups[0].Update
	if cpu.HealthCheck != UpdateHealthCheckChecks || cpu.MinHealthyTime != DefaultUpdateMinHealthyTime ||
		cpu.HealthyDeadline != DefaultUpdateHealthyDeadline || cpu.ProgressDeadline != DefaultUpdateProgressDeadline {
		t.Fatalf("defaults = %+v", cpu)
	}
	gpu := updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1}, 1).TaskGroups[0].Update
	if gpu.MinHealthyTime != GPUUpdateMinHealthyTime || gpu.HealthyDeadline != GPUUpdateHealthyDeadline || gpu.ProgressDeadline != GPUUpdateProgressDeadline {
		t.Fatalf("a GPU group's health waits are not in minutes: %+v", gpu)
	}
	// A job-level block is every group's default.
	j := &Job{ID: "web", Update: &UpdateStrategy{MaxParallel: 2, Canary: 1}, TaskGroups: []*TaskGroup{{Name: "a", Count: 2,
		Tasks: []*Task{{Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"}}}}}}
	j.Canonicalize()
	if u := j.TaskGroups[0].Update; u == nil || u.MaxParallel != 2 || u.Canary != 1 {
		t.Fatalf("job-level update not copied to the group: %+v", u)
	}
}

func TestUpdateStrategyValidate(t *testing.T) {
	neg := -1
	five := 5
	cases := []struct {
		name string
		job  *Job
		want string
	}{
		{"batch", updateJob(JobTypeBatch, &UpdateStrategy{MaxParallel: 1}, 0), `group "web": update: an update block is only allowed in a service job`},
		{"canary above count", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, Canary: 4}, 0), `group "web": update: canary: must be at most the group's count (3), got 4`},
		{"negative canary", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, Canary: -1}, 0), `update: canary: must be 0 or more`},
		{"health check", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, HealthCheck: "http"}, 0), `update: health_check: must be "checks", "task_states" or "manual", got "http"`},
		{"negative duration", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, MinHealthyTime: -time.Second}, 0), `update: min_healthy_time: must be between 0 and 24h0m0s, got -1s`},
		{"huge duration", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, ProgressDeadline: 48 * time.Hour}, 0), `update: progress_deadline: must be between 0 and 24h0m0s`},
		{"min healthy after deadline", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, MinHealthyTime: time.Minute, HealthyDeadline: 30 * time.Second, ProgressDeadline: time.Hour}, 0),
			`update: min_healthy_time: must be less than healthy_deadline (30s), got 1m0s`},
		{"deadline after progress", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, HealthyDeadline: time.Hour, ProgressDeadline: time.Minute}, 0),
			`update: healthy_deadline: must be less than progress_deadline (1m0s), got 1h0m0s`},
		{"max_parallel", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: -2}, 0), `update: max_parallel: must be between 0 and 100000, got -2`},
		{"max_unavailable negative", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, MaxUnavailable: &neg}, 0), `update: max_unavailable: must be between 0 and the group's count (3), got -1`},
		{"max_unavailable above count", updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, MaxUnavailable: &five}, 0), `got 5`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.job.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want a problem containing %q", err, tc.want)
			}
		})
	}
	if err := updateJob(JobTypeService, &UpdateStrategy{MaxParallel: 1, Canary: 3}, 0).Validate(); err != nil {
		t.Fatalf("a valid update block refused: %v", err)
	}
}

func TestAllocDeploymentStatusJSON(t *testing.T) {
	h := true
	in := AllocDeploymentStatus{Healthy: &h, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), Canary: true}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"Timestamp":"2026-01-02T03:04:05.000000006Z"`) {
		t.Fatalf("JSON = %s, want an RFC 3339 Timestamp as Nomad's API", b)
	}
	var out AllocDeploymentStatus
	if err := json.Unmarshal(b, &out); err != nil || out.Timestamp != in.Timestamp || !out.IsHealthy() || !out.Canary {
		t.Fatalf("round trip = %+v, %v", out, err)
	}
	b, _ = json.Marshal(AllocDeploymentStatus{})
	if strings.Contains(string(b), "Timestamp") {
		t.Fatalf("zero Timestamp rendered: %s", b)
	}
}
