package http

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestUIAllocDeadline: the allocation page shows a task's max_run_duration
// and its deadline, and the Deadline Exceeded event.
func TestUIAllocDeadline(t *testing.T) {
	fs, _, ts := fixture(t)
	job := &structs.Job{ID: "dl", Name: "dl", Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g", MaxRunDuration: 3 * time.Second,
		Tasks: []*structs.Task{{Name: "main", Driver: "native"}}}}}
	fs.jobs["dl"] = job
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	fs.allocs["dead11ne-0001"] = &structs.Allocation{ID: "dead11ne-0001", JobID: "dl", Job: job, TaskGroup: "g", NodeID: "node-1", ClientStatus: "failed",
		ClientDescription: "Allocation exceeded max_run_duration: task main",
		TaskStates: map[string]*structs.TaskState{"main": {State: structs.TaskStateDead, Failed: true, Deadline: deadline, Events: []*structs.TaskEvent{
			{Type: structs.TaskEventDeadlineExceeded, Time: deadline, DisplayMessage: "Task exceeded its max_run_duration of 3s and was stopped; not restarting"},
		}}}}
	body := getPage(t, ts.URL+"/ui/allocation/dead11ne-0001")
	for _, want := range []string{"max run 3s, deadline " + fmtNanoTime(deadline), "Deadline Exceeded", "Allocation exceeded max_run_duration"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
