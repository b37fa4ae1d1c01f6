package scheduler

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestRescheduleDelay checks that a failed allocation whose reschedule
// delay has not passed at the evaluation's time is kept and one
// "reschedule-later" evaluation waits until it is due, and that an
// evaluation at or after the due time places the replacement.
func TestRescheduleDelay(t *testing.T) {
	const failAt = int64(1_000 * time.Second)
	delay := 30 * time.Second
	due := failAt + int64(delay)
	cases := []struct {
		name       string
		delay      time.Duration
		modifyTime int64 // the evaluation's ModifyTime
		waitUntil  int64 // the evaluation's WaitUntil
		replace    bool
		followUp   int64 // WaitUntil of the expected follow-up; 0: none
	}{
		{"no delay replaces at once", 0, failAt, 0, true, 0},
		{"not due waits", delay, failAt + int64(10*time.Second), 0, false, due},
		{"not due right at the failure", delay, failAt, 0, false, due},
		{"due by modify time", delay, due, 0, true, 0},
		{"due by wait until", delay, failAt + int64(time.Second), due, true, 0},
		{"long after due", delay, due + int64(time.Hour), 0, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n1", 0, "", 0))
			job := gpuJob("j", structs.JobTypeService, 1, 0, 100, 100)
			job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Unlimited: true, Delay: tc.delay}
			h.register(job)
			live := h.state.liveAllocs("j")
			if len(live) != 1 {
				t.Fatalf("%d live allocations after register, want 1", len(live))
			}
			h.state.setClientStatus(structs.AllocClientStatusFailed, live[0])
			failed := h.state.allocs[live[0].ID]
			failed.ModifyTime = failAt
			h.planner.created = nil

			ev := newEval(h.state.jobs["j"], "alloc-failure")
			ev.ModifyTime, ev.WaitUntil = tc.modifyTime, tc.waitUntil
			got := h.process(ev)
			if got.Status != structs.EvalStatusComplete {
				t.Fatalf("eval status %q, want complete", got.Status)
			}
			now := h.state.liveAllocs("j")
			if tc.replace {
				if len(now) != 1 || now[0].PreviousAllocation != failed.ID {
					t.Fatalf("live %v, want one replacement of %s", now, failed.ID)
				}
			} else if len(now) != 0 {
				t.Fatalf("%d live allocations, want none before the delay passes", len(now))
			}
			if tc.followUp == 0 {
				if len(h.planner.created) != 0 {
					t.Fatalf("created %d evals, want none", len(h.planner.created))
				}
				return
			}
			if len(h.planner.created) != 1 {
				t.Fatalf("created %d evals, want one follow-up", len(h.planner.created))
			}
			f := h.planner.created[0]
			if f.TriggeredBy != structs.EvalTriggerRescheduleLater || f.Status != structs.EvalStatusPending ||
				f.WaitUntil != tc.followUp || f.PreviousEval != ev.ID || f.JobID != "j" {
				t.Fatalf("follow-up %+v, want pending reschedule-later waiting until %d", f, tc.followUp)
			}
			// The follow-up, delivered at its WaitUntil, places the replacement.
			h.planner.created = nil
			h.process(f)
			if now := h.state.liveAllocs("j"); len(now) != 1 || now[0].PreviousAllocation != failed.ID {
				t.Fatalf("after the follow-up: live %v, want one replacement of %s", now, failed.ID)
			}
			if len(h.planner.created) != 0 {
				t.Fatalf("the follow-up created %d more evals", len(h.planner.created))
			}
		})
	}
}

// TestReconcileRescheduleAtEarliest checks that with several failed
// indexes not yet due, rescheduleAt is the earliest due time.
func TestReconcileRescheduleAtEarliest(t *testing.T) {
	job := &structs.Job{ID: "j", Type: structs.JobTypeService, JobModifyIndex: 1, TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 2, ReschedulePolicy: &structs.ReschedulePolicy{Unlimited: true, Delay: time.Minute},
		Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	mk := func(id string, idx int, at int64) *structs.Allocation {
		return &structs.Allocation{ID: id, Name: structs.AllocName("j", "g", idx), JobID: "j", Job: job, TaskGroup: "g",
			DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusFailed,
			CreateIndex: uint64(idx + 1), ModifyTime: at}
	}
	a, b := mk("a", 0, int64(50*time.Second)), mk("b", 1, int64(20*time.Second))
	res := reconcile(job, []*structs.Allocation{a, b}, int64(30*time.Second))
	if len(res.places) != 0 || res.rescheduleAt != int64(80*time.Second) {
		t.Fatalf("places %d rescheduleAt %v, want 0 and 80s", len(res.places), time.Duration(res.rescheduleAt))
	}
	res = reconcile(job, []*structs.Allocation{a, b}, int64(80*time.Second))
	if len(res.places) != 1 || res.places[0].previous != b || res.rescheduleAt != int64(110*time.Second) {
		t.Fatalf("places %d rescheduleAt %v, want b replaced and 110s", len(res.places), time.Duration(res.rescheduleAt))
	}
}

// TestReconcileRescheduleExponential checks that with an exponential delay
// the k-th failure of an index within Interval waits Delay * 2^(k-1),
// capped at MaxDelay.
func TestReconcileRescheduleExponential(t *testing.T) {
	rp := &structs.ReschedulePolicy{Unlimited: true, Interval: time.Hour, Delay: 10 * time.Second,
		DelayFunction: structs.RescheduleDelayExponential, MaxDelay: 30 * time.Second}
	job := &structs.Job{ID: "j", Type: structs.JobTypeService, JobModifyIndex: 1, TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 1, ReschedulePolicy: rp, Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	var allocs []*structs.Allocation
	at := int64(2 * time.Hour)
	for k, want := range []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second} {
		at += int64(time.Minute)
		allocs = append(allocs, &structs.Allocation{ID: string(rune('a' + k)), Name: structs.AllocName("j", "g", 0), JobID: "j",
			Job: job, TaskGroup: "g", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusFailed,
			CreateIndex: uint64(k + 1), ModifyTime: at})
		res := reconcile(job, allocs, at)
		if len(res.places) != 0 || res.rescheduleAt != at+int64(want) {
			t.Fatalf("failure %d: places %d, due after %s, want %s", k+1, len(res.places), time.Duration(res.rescheduleAt-at), want)
		}
	}
	// A failure outside Interval of the newest no longer counts: the
	// fifth failure, 2h after the others, waits the base delay again.
	at += int64(2 * time.Hour)
	allocs = append(allocs, &structs.Allocation{ID: "e", Name: structs.AllocName("j", "g", 0), JobID: "j",
		Job: job, TaskGroup: "g", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusFailed,
		CreateIndex: 5, ModifyTime: at})
	if res := reconcile(job, allocs, at); res.rescheduleAt != at+int64(10*time.Second) {
		t.Fatalf("after a quiet interval: due after %s, want 10s", time.Duration(res.rescheduleAt-at))
	}
}
