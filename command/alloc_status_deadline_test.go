package command

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// TestAllocStatusShowsDeadline: a task with a max_run_duration shows it
// (the shorter of the group's and the task's) and its deadline; the
// Deadline Exceeded event is listed; a task without one shows neither.
func TestAllocStatusShowsDeadline(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := &api.Allocation{
		ID: "abcd1234-0000-0000-0000-000000000000", TaskGroup: "g", ClientStatus: api.AllocClientStatusFailed,
		ClientDescription: "Allocation exceeded max_run_duration: task main",
		Job: &api.Job{ID: "j", TaskGroups: []*api.TaskGroup{{Name: "g", MaxRunDuration: time.Hour, Tasks: []*api.Task{
			{Name: "main", MaxRunDuration: 3 * time.Second}, {Name: "other"},
		}}}},
		TaskStates: map[string]*api.TaskState{
			"main": {State: api.TaskStateDead, Failed: true, Deadline: deadline, Events: []*api.TaskEvent{
				{Type: "Deadline Exceeded", Time: deadline.UnixNano(), DisplayMessage: "Task exceeded its max_run_duration of 3s and was stopped; not restarting"},
			}},
		},
	}
	m := &Meta{Location: time.UTC}
	main := m.formatTask(a, "main")
	for _, want := range []string{"Max Run Duration = 3s", "Deadline         = 2026-01-02T03:04:05Z", "Deadline Exceeded", "max_run_duration of 3s"} {
		if !strings.Contains(main, want) {
			t.Errorf("task main lacks %q:\n%s", want, main)
		}
	}
	if other := m.formatTask(a, "other"); !strings.Contains(other, "Max Run Duration = 1h0m0s") || strings.Contains(other, "Deadline ") {
		t.Errorf("task other (group's hour, no state yet):\n%s", other)
	}
	a.Job.TaskGroups[0].MaxRunDuration = 0
	if other := m.formatTask(a, "other"); strings.Contains(other, "Max Run Duration") {
		t.Errorf("task without a max_run_duration shows one:\n%s", other)
	}
}
