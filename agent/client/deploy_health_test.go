package client

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

// checksFake is a ChecksHealthProvider with a fixed answer.
type checksFake struct{ healthy, known bool }

func (c checksFake) ChecksHealthy(string) (bool, bool) { return c.healthy, c.known }

// TestDeploymentHealthTracker runs native allocations of a deployment and
// checks the client's verdict: healthy after min_healthy_time of running
// tasks, unhealthy for a task that fails, unhealthy when the healthy
// deadline passes first (checks that fail), none for manual health.
func TestDeploymentHealthTracker(t *testing.T) {
	cases := []struct {
		name   string
		cmd    string
		check  string
		checks ChecksHealthProvider
		want   *bool
	}{
		{"running for min_healthy_time is healthy", "exec sleep 60", structs.UpdateHealthCheckTaskStates, nil, ptrTo(true)},
		{"a failed task is unhealthy", "exit 3", structs.UpdateHealthCheckTaskStates, nil, ptrTo(false)},
		{"checks with no provider judge by task states", "exec sleep 60", structs.UpdateHealthCheckChecks, nil, ptrTo(true)},
		{"checks without checks judge by task states", "exec sleep 60", structs.UpdateHealthCheckChecks, checksFake{known: false}, ptrTo(true)},
		{"failing checks are unhealthy at the deadline", "exec sleep 60", structs.UpdateHealthCheckChecks, checksFake{known: true}, ptrTo(false)},
		{"manual health sets nothing", "exec sleep 60", structs.UpdateHealthCheckManual, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := clienttest.NewServer()
			c := newTestClient(t, srv, "", func(cfg *Config) { cfg.ChecksHealth = tc.checks })
			a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", tc.cmd}, nil)
			tg := a.Job.TaskGroups[0]
			tg.RestartPolicy = &structs.RestartPolicy{Attempts: 0, Mode: structs.RestartModeFail}
			tg.Update = &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: tc.check, MinHealthyTime: time.Second,
				HealthyDeadline: 3 * time.Second, ProgressDeadline: time.Minute}
			a.DeploymentID = "d1"
			srv.UpsertAlloc(a)
			if tc.want == nil {
				srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
				// The verdict is a user's: no tracker runs for it.
				c.mu.Lock()
				ar := c.runners[a.ID]
				c.mu.Unlock()
				ar.mu.Lock()
				tracked := ar.healthDeployment
				ar.mu.Unlock()
				if tracked != "" {
					t.Fatalf("manual health is tracked by the client (deployment %q)", tracked)
				}
				return
			}
			got := srv.WaitForAlloc(t, a.ID, 15*time.Second, func(a *structs.Allocation) bool {
				return a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil
			})
			if *got.DeploymentStatus.Healthy != *tc.want || got.DeploymentStatus.Timestamp == 0 {
				t.Fatalf("verdict = %+v, want healthy %v; %s", got.DeploymentStatus, *tc.want, clienttest.DescribeTaskStates(got.TaskStates))
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
