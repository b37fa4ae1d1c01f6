package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

func TestTerminatedMessage(t *testing.T) {
	cases := []struct {
		name     string
		r        *driver.ExitResult
		memoryMB int64
		want     string
	}{
		{"exit", &driver.ExitResult{ExitCode: 3}, 64, "Exit Code: 3"},
		{"signal", &driver.ExitResult{ExitCode: -1, Signal: 15}, 64, "Exit Code: -1, Signal: 15"},
		{"OOM with a limit", &driver.ExitResult{ExitCode: -1, Signal: 9, OOMKilled: true}, 32, "Exit Code: -1, Signal: 9, OOM killed (memory limit 32 MiB)"},
		{"OOM without a limit", &driver.ExitResult{ExitCode: 137, OOMKilled: true}, 0, "Exit Code: 137, OOM killed"},
		{"lost", &driver.ExitResult{ExitCode: -1, Err: errors.New("gone")}, 64, "Exit Code: -1, Exit Message: gone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := terminatedMessage(tc.r, tc.memoryMB); got != tc.want {
				t.Fatalf("terminatedMessage = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNativeTaskOOMKilledEvent runs a native task over its memory limit
// through the client: the task's Terminated event names the OOM kill and
// the limit. It also has cpu_hard_limit set, which starts only when the
// client passes the node's MHz per core to the driver.
func TestNativeTaskOOMKilledEvent(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.DevGPUs = 0 })
	if lim := c.Node().Attributes["driver.native.limits"]; lim == "none" || lim == "" {
		t.Skipf("the native driver enforces no limits here: %s", c.Node().Drivers["native"].HealthDescription)
	}
	// tail keeps a line that never ends in memory: 200 MB of zeros.
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "head -c 200000000 /dev/zero | tail"}, nil)
	task := a.Job.TaskGroups[0].Tasks[0]
	task.Config["cpu_hard_limit"] = true
	task.Resources.MemoryMB, task.Resources.CPU = 32, 1000
	a.AllocatedResources.Tasks["main"].MemoryMB, a.AllocatedResources.Tasks["main"].CPU = 32, 1000
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 60*time.Second, terminal)
	ev := eventOf(got, "main", structs.TaskEventTerminated)
	if ev == nil || !strings.Contains(ev.Message, "OOM killed (memory limit 32 MiB)") {
		t.Fatalf("no Terminated event naming the OOM kill: %s", clienttest.DescribeTaskStates(got.TaskStates))
	}
}
