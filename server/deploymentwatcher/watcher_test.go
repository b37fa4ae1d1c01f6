package deploymentwatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestWatcherRunReactsToChanges runs the watcher's loop against a real
// FSM: a healthy verdict reported while it waits wakes it (no polling
// interval to wait out: MaxWait is an hour), and it marks the deployment
// successful through an entry, enqueueing an evaluation.
func TestWatcherRunReactsToChanges(t *testing.T) {
	h := newHarness(t, statetest.Node(0))
	job := serviceJob(&structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
		MinHealthyTime: time.Second, HealthyDeadline: time.Minute, ProgressDeadline: time.Hour}, 0)
	h.register(job)
	d := h.deployment(job.ID)
	var mu sync.Mutex
	var enqueued []*structs.Evaluation
	w, err := New(Config{
		State: h.f.State,
		Apply: func(t structs.MessageType, msg interface{}) (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			return h.apply(t, msg)
		},
		Enqueue: func(e *structs.Evaluation) {
			mu.Lock()
			enqueued = append(enqueued, e)
			mu.Unlock()
		},
		MaxWait: time.Hour,
		Now:     func() time.Time { return time.Unix(0, h.now) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var ups []*structs.Allocation
	for _, a := range h.live(job.ID) {
		yes := true
		ups = append(ups, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning,
			DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &yes, Timestamp: h.now}})
	}
	mu.Lock()
	_, err = h.apply(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: ups, UpdatedAt: h.now})
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 10*time.Second, "the deployment marked successful", func() (bool, string) {
		got, _ := h.st().DeploymentByID(nil, d.ID)
		return got.Status == structs.DeploymentStatusSuccessful, got.Status
	})
	mu.Lock()
	defer mu.Unlock()
	if len(enqueued) == 0 || enqueued[0].TriggeredBy != structs.EvalTriggerDeploymentWatcher || enqueued[0].CreateIndex == 0 {
		t.Fatalf("evaluations enqueued = %+v", enqueued)
	}
	if j := h.job(job.ID); !j.Stable {
		t.Fatal("version not stable after the watcher's success")
	}
}

func TestNewRequiresStateApplyEnqueue(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without State, Apply and Enqueue accepted")
	}
}
