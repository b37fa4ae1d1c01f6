package deploymentwatcher

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// serviceJob is a service job "web" of count 3 with the update strategy u.
func serviceJob(u *structs.UpdateStrategy, gpus int) *structs.Job {
	j := statetest.Job()
	j.ID, j.Name = "web", "web"
	tg := j.TaskGroups[0]
	tg.Count = 3
	tg.Update = u
	if gpus > 0 {
		tg.Tasks[0].Resources.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: gpus}}
	}
	return j
}

// version returns job with a task env that makes version n (a change
// that replaces allocations).
func version(job *structs.Job, n string) *structs.Job {
	j := job.Copy()
	j.TaskGroups[0].Tasks[0].Env = map[string]string{"VERSION": n}
	return j
}

func intPtr(n int) *int { return &n }

// startHealthy registers job and reports every allocation healthy, so
// version 0's deployment succeeds and the version is stable.
func startHealthy(t *testing.T, h *harness, job *structs.Job) {
	t.Helper()
	h.register(job)
	h.health(true, h.live(job.ID)...)
	d := h.deployment(job.ID)
	if d == nil || d.Status != structs.DeploymentStatusSuccessful {
		t.Fatalf("first deployment = %+v", d)
	}
	if j := h.job(job.ID); !j.Stable || j.Version != 0 {
		t.Fatalf("version 0 after a successful deployment: stable %v version %d", j.Stable, j.Version)
	}
}

// rollOut reports the new version's unverdicted allocations healthy one
// round at a time until none is left, checking after each round that at
// most maxParallel new allocations await a verdict and that at least
// minHealthy allocations are live and healthy (an old one, or a new one
// already judged healthy).
func rollOut(t *testing.T, h *harness, jobID string, v uint64, maxParallel, minHealthy int) {
	t.Helper()
	for round := 0; round < 20; round++ {
		live := h.live(jobID)
		waiting := unverdicted(ofVersion(live, v))
		healthy := 0
		for _, a := range live {
			if a.Job.Version != v || a.DeploymentStatus.IsHealthy() {
				healthy++
			}
		}
		if len(waiting) > maxParallel {
			t.Fatalf("round %d: %d new allocations at once, max_parallel %d", round, len(waiting), maxParallel)
		}
		if healthy < minHealthy {
			t.Fatalf("round %d: %d healthy allocations, want at least %d", round, healthy, minHealthy)
		}
		if len(waiting) == 0 {
			return
		}
		h.health(true, waiting...)
	}
	t.Fatal("the rollout does not end")
}

func TestDeploymentStateMachine(t *testing.T) {
	rolling := &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
		MinHealthyTime: time.Second, HealthyDeadline: time.Minute, ProgressDeadline: 5 * time.Minute}
	with := func(f func(u *structs.UpdateStrategy)) *structs.UpdateStrategy {
		u := rolling.Copy()
		f(u)
		return u
	}
	cases := []struct {
		name  string
		nodes func() []*structs.Node
		job   *structs.Job
		run   func(t *testing.T, h *harness, job *structs.Job)
	}{{
		name: "rolling update, one at a time, stop first",
		job:  serviceJob(rolling, 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			d := h.deployment(job.ID)
			if d.JobVersion != 1 || d.Status != structs.DeploymentStatusRunning || d.TaskGroups["web"].DesiredTotal != 3 {
				t.Fatalf("deployment of version 1 = %+v", d)
			}
			if n := len(ofVersion(h.live(job.ID), 1)); n != 1 {
				t.Fatalf("%d new allocations placed at once, want 1", n)
			}
			rollOut(t, h, job.ID, 1, 1, 2)
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusSuccessful || d.TaskGroups["web"].HealthyAllocs != 3 {
				t.Fatalf("deployment after the rollout = %s %+v", d.Status, d.TaskGroups["web"])
			}
			if live := h.live(job.ID); len(live) != 3 || len(ofVersion(live, 1)) != 3 {
				t.Fatalf("live after the rollout: %d, of version 1 %d", len(live), len(ofVersion(live, 1)))
			}
			if !h.job(job.ID).Stable {
				t.Fatal("version 1 not stable after its deployment succeeded")
			}
		},
	}, {
		name: "canary, then promote",
		job:  serviceJob(with(func(u *structs.UpdateStrategy) { u.Canary = 1 }), 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			live := h.live(job.ID)
			canaries := ofVersion(live, 1)
			if len(live) != 4 || len(canaries) != 1 || !canaries[0].DeploymentStatus.IsCanary() {
				t.Fatalf("live %d, canaries %d: want 3 old beside 1 canary", len(live), len(canaries))
			}
			d := h.deployment(job.ID)
			if d.StatusDescription != structs.DeploymentStatusDescriptionRunningNeedsPromotion || d.TaskGroups["web"].DesiredCanaries != 1 {
				t.Fatalf("deployment = %q %+v", d.StatusDescription, d.TaskGroups["web"])
			}
			if _, err := h.apply(structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true}); err == nil ||
				!strings.Contains(err.Error(), "0/1 healthy canaries") {
				t.Fatalf("promote before the canary is healthy: %v", err)
			}
			h.health(true, canaries...)
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusRunning || len(h.live(job.ID)) != 4 {
				t.Fatalf("a healthy canary is not promoted without auto_promote: %s, live %d", d.Status, len(h.live(job.ID)))
			}
			h.must(h.apply(structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true,
				Eval: &structs.Evaluation{ID: structs.GenerateUUID(), JobID: job.ID, Type: job.Type, Priority: 50, Status: structs.EvalStatusPending}}))
			h.pending = append(h.pending, &structs.Evaluation{ID: structs.GenerateUUID(), JobID: job.ID, Type: job.Type, Priority: 50, Status: structs.EvalStatusPending})
			h.settle()
			if live := h.live(job.ID); len(live) > 3 {
				t.Fatalf("after promotion %d live, want the canary to take an old one's place", len(live))
			}
			rollOut(t, h, job.ID, 1, 1, 2)
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusSuccessful {
				t.Fatalf("deployment = %s %+v", d.Status, d.TaskGroups["web"])
			}
			if live := h.live(job.ID); len(live) != 3 || len(ofVersion(live, 1)) != 3 {
				t.Fatalf("live after the rollout: %d, of version 1 %d", len(live), len(ofVersion(live, 1)))
			}
		},
	}, {
		name: "canary with auto_promote",
		job:  serviceJob(with(func(u *structs.UpdateStrategy) { u.Canary = 1; u.AutoPromote = true }), 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			h.health(true, ofVersion(h.live(job.ID), 1)...)
			if d := h.deployment(job.ID); !d.TaskGroups["web"].Promoted {
				t.Fatalf("healthy canary not promoted automatically: %+v", d.TaskGroups["web"])
			}
			rollOut(t, h, job.ID, 1, 1, 2)
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusSuccessful {
				t.Fatalf("deployment = %s", d.Status)
			}
		},
	}, {
		name: "auto_revert on an unhealthy version",
		job:  serviceJob(with(func(u *structs.UpdateStrategy) { u.AutoRevert = true }), 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "bad"))
			bad := ofVersion(h.live(job.ID), 1)
			if len(bad) != 1 {
				t.Fatalf("%d new allocations, want 1", len(bad))
			}
			failed := h.deployment(job.ID)
			h.health(false, bad...)
			failed, _ = h.st().DeploymentByID(nil, failed.ID)
			if failed.Status != structs.DeploymentStatusFailed ||
				failed.StatusDescription != "Failed due to unhealthy allocations - rolling back to job version 0" {
				t.Fatalf("deployment = %s %q", failed.Status, failed.StatusDescription)
			}
			j := h.job(job.ID)
			if j.Version != 2 || j.TaskGroups[0].Tasks[0].Env["VERSION"] != "" {
				t.Fatalf("after the revert: version %d env %v, want version 2 with version 0's spec", j.Version, j.TaskGroups[0].Tasks[0].Env)
			}
			rollOut(t, h, job.ID, 2, 1, 2)
			h.watch()
			live := h.live(job.ID)
			if len(live) != 3 || len(ofVersion(live, 2)) != 3 {
				t.Fatalf("after the revert %d live, %d of version 2", len(live), len(ofVersion(live, 2)))
			}
			if d := h.deployment(job.ID); d.JobVersion != 2 || d.Status != structs.DeploymentStatusSuccessful {
				t.Fatalf("revert deployment = v%d %s", d.JobVersion, d.Status)
			}
		},
	}, {
		name: "progress deadline",
		job:  serviceJob(rolling, 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			d := h.deployment(job.ID)
			by := d.TaskGroups["web"].RequireProgressBy
			if by != h.now+int64(5*time.Minute) {
				t.Fatalf("RequireProgressBy = %d, want placement time + 5m", by)
			}
			h.now = by
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusRunning {
				t.Fatalf("failed at the deadline itself: %s", d.Status)
			}
			h.now = by + 1
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusFailed ||
				d.StatusDescription != structs.DeploymentStatusDescriptionProgressDeadline {
				t.Fatalf("after the deadline: %s %q", d.Status, d.StatusDescription)
			}
			// A failed deployment replaces nothing more.
			if n := len(ofVersion(h.live(job.ID), 0)); n != 2 {
				t.Fatalf("%d old allocations left, want 2", n)
			}
		},
	}, {
		name: "a stopped job cancels its running deployment",
		job:  serviceJob(rolling, 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			running := h.deployment(job.ID)
			stopped := h.job(job.ID).Copy()
			stopped.Stop = true
			h.register(stopped)
			d, _ := h.st().DeploymentByID(nil, running.ID)
			if d.Status != structs.DeploymentStatusCancelled || d.StatusDescription != structs.DeploymentStatusDescriptionStoppedJob {
				t.Fatalf("deployment after the stop = %s %q", d.Status, d.StatusDescription)
			}
			if n := len(h.live(job.ID)); n != 0 {
				t.Fatalf("%d allocations still live after the stop", n)
			}
		},
	}, {
		name: "a newer version cancels the running deployment",
		job:  serviceJob(rolling, 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			first := h.deployment(job.ID)
			h.register(version(job, "2"))
			d, _ := h.st().DeploymentByID(nil, first.ID)
			if d.Status != structs.DeploymentStatusCancelled || d.StatusDescription != structs.DeploymentStatusDescriptionNewerJob {
				t.Fatalf("older deployment = %s %q", d.Status, d.StatusDescription)
			}
			if latest := h.deployment(job.ID); latest.JobVersion != 2 || latest.Status != structs.DeploymentStatusRunning {
				t.Fatalf("newest deployment = v%d %s", latest.JobVersion, latest.Status)
			}
			rollOut(t, h, job.ID, 2, 1, 2)
			h.watch()
			if live := h.live(job.ID); len(live) != 3 || len(ofVersion(live, 2)) != 3 {
				t.Fatalf("live after the rollout: %d, of version 2 %d", len(live), len(ofVersion(live, 2)))
			}
		},
	}, {
		name: "manual health",
		job:  serviceJob(with(func(u *structs.UpdateStrategy) { u.HealthCheck = structs.UpdateHealthCheckManual }), 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			h.register(job)
			d := h.deployment(job.ID)
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusRunning {
				t.Fatalf("without a verdict: %s", d.Status)
			}
			var ids []string
			for _, a := range h.live(job.ID) {
				ids = append(ids, a.ID)
			}
			if _, err := h.apply(structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{
				DeploymentID: d.ID, HealthyAllocationIDs: []string{"not-an-alloc"}, Timestamp: h.now}); err == nil {
				t.Fatal("health of an unknown allocation accepted")
			}
			h.must(h.apply(structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{
				DeploymentID: d.ID, HealthyAllocationIDs: ids, Timestamp: h.now}))
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusSuccessful || d.TaskGroups["web"].HealthyAllocs != 3 {
				t.Fatalf("after manual health: %s %+v", d.Status, d.TaskGroups["web"])
			}
		},
	}, {
		name: "max_unavailable = 0 with room: never fewer than count healthy",
		job:  serviceJob(with(func(u *structs.UpdateStrategy) { u.MaxUnavailable = intPtr(0) }), 0),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			live := h.live(job.ID)
			if len(live) != 4 || len(ofVersion(live, 0)) != 3 {
				t.Fatalf("live %d (old %d): want the new copy beside all 3 old ones", len(live), len(ofVersion(live, 0)))
			}
			rollOut(t, h, job.ID, 1, 1, 3)
			h.watch()
			if live := h.live(job.ID); len(live) != 3 || len(ofVersion(live, 1)) != 3 {
				t.Fatalf("live after the rollout: %d, of version 1 %d", len(live), len(ofVersion(live, 1)))
			}
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusSuccessful {
				t.Fatalf("deployment = %s", d.Status)
			}
		},
	}, {
		name:  "max_unavailable = 0 without room: nothing stops and the evaluation says why",
		nodes: func() []*structs.Node { return []*structs.Node{statetest.Node(3)} },
		job:   serviceJob(with(func(u *structs.UpdateStrategy) { u.MaxUnavailable = intPtr(0) }), 1),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.evals = map[string]*structs.Evaluation{}
			h.register(version(job, "1"))
			live := h.live(job.ID)
			if len(live) != 3 || len(ofVersion(live, 0)) != 3 {
				t.Fatalf("live %d, old %d: want the 3 old ones untouched", len(live), len(ofVersion(live, 0)))
			}
			found := false
			for _, e := range h.evals {
				if m := e.FailedTGAllocs["web"]; m != nil && strings.Contains(m.Explanation, "max_unavailable = 0") {
					found = true
				}
			}
			if !found {
				t.Fatalf("no evaluation explains the surge that does not fit: %+v", h.evals)
			}
		},
	}, {
		name:  "a canary with no free GPU waits with a reason, not failing the deployment",
		nodes: func() []*structs.Node { return []*structs.Node{statetest.Node(3)} },
		job:   serviceJob(with(func(u *structs.UpdateStrategy) { u.Canary = 1 }), 1),
		run: func(t *testing.T, h *harness, job *structs.Job) {
			startHealthy(t, h, job)
			h.register(version(job, "1"))
			d := h.deployment(job.ID)
			if d.JobVersion != 1 || d.Status != structs.DeploymentStatusRunning || !strings.HasPrefix(d.StatusDescription, "Deployment is waiting: a canary") {
				t.Fatalf("deployment = v%d %s %q", d.JobVersion, d.Status, d.StatusDescription)
			}
			if d.TaskGroups["web"].RequireProgressBy != 0 {
				t.Fatalf("the progress deadline started without a placement: %d", d.TaskGroups["web"].RequireProgressBy)
			}
			h.now += int64(time.Hour)
			h.watch()
			if d := h.deployment(job.ID); d.Status != structs.DeploymentStatusRunning {
				t.Fatalf("a waiting canary failed the deployment: %s %q", d.Status, d.StatusDescription)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*structs.Node{statetest.Node(0)}
			if tc.nodes != nil {
				nodes = tc.nodes()
			}
			h := newHarness(t, nodes...)
			tc.run(t, h, tc.job)
		})
	}
}
