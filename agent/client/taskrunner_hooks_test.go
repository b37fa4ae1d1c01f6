package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

type recordingHook struct {
	n    string
	err  error
	ran  *[]string
	ctxs *[]context.Context
}

func (h recordingHook) name() string         { return h.n }
func (h recordingHook) failureEvent() string { return "Failed " + h.n }
func (h recordingHook) prestart(ctx context.Context, _ *taskRunner) error {
	*h.ran = append(*h.ran, h.n)
	*h.ctxs = append(*h.ctxs, ctx)
	return h.err
}

// TestTaskRunnerPrestartHooks checks the task runner's prestart hook point:
// hooks run in order with the configured context, the first failure ends
// the task dead and failed with that hook's event carrying the error, and
// later hooks (and the driver) are never reached. The runner needs nothing
// beyond its taskRunnerConfig.
func TestTaskRunnerPrestartHooks(t *testing.T) {
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "client")
	var ran []string
	var ctxs []context.Context
	var mu sync.Mutex
	var events []string
	var final structs.TaskState
	tr := newTaskRunner(taskRunnerConfig{
		Alloc:    &structs.Allocation{ID: "a1", JobID: "j", TaskGroup: "g"},
		AllocDir: t.TempDir(),
		JobName:  "j",
		Task:     &structs.Task{Name: "t"},
		Ctx:      ctx,
		// Log rotation limits: setup opens the task's log files.
		LogMaxFiles:    2,
		LogMaxFileSize: 1 << 20,
		UpdateState: func(task string, e *structs.TaskEvent, mod func(ts *structs.TaskState)) {
			mu.Lock()
			defer mu.Unlock()
			if task != "t" {
				t.Errorf("state update for task %q", task)
			}
			events = append(events, e.Type+": "+e.Message)
			if mod != nil {
				mod(&final)
			}
		},
		Prestart: []taskPrestartHook{
			recordingHook{n: "one", ran: &ran, ctxs: &ctxs},
			recordingHook{n: "two", err: errors.New("boom"), ran: &ran, ctxs: &ctxs},
			recordingHook{n: "three", ran: &ran, ctxs: &ctxs},
		},
	})
	tr.run()
	if want := []string{"one", "two"}; !slices.Equal(ran, want) {
		t.Fatalf("hooks ran %v, want %v (events %q)", ran, want, events)
	}
	for _, c := range ctxs {
		if c.Value(ctxKey{}) != "client" {
			t.Fatal("hook did not get the configured context")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{structs.TaskEventSetup + ": Building Task Directory", "Failed two: boom"}; !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	if final.State != structs.TaskStateDead || !final.Failed || final.FinishedAt == 0 {
		t.Fatalf("final state %+v, want dead and failed", final)
	}
}
