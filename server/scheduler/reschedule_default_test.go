package scheduler

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// failAndReschedule plays one failure of the job's only live allocation at
// failAt (Unix nanoseconds): it processes the alloc-failure evaluation at
// failAt and, when that creates a reschedule-later follow-up, processes the
// follow-up at its WaitUntil. It returns the delay between the failure and
// the replacement, or -1 when no replacement was placed (and no follow-up
// created).
func failAndReschedule(t *testing.T, h *harness, failAt int64) time.Duration {
	t.Helper()
	live := h.state.liveAllocs("j")
	if len(live) != 1 {
		t.Fatalf("%d live allocations before the failure, want 1", len(live))
	}
	h.state.setClientStatus(structs.AllocClientStatusFailed, live[0])
	h.state.allocs[live[0].ID].ModifyTime = failAt
	h.planner.created = nil
	ev := newEval(h.state.jobs["j"], "alloc-failure")
	ev.ModifyTime = failAt
	if got := h.process(ev); got.Status != structs.EvalStatusComplete {
		t.Fatalf("alloc-failure eval status %q, want complete", got.Status)
	}
	if n := len(h.state.liveAllocs("j")); n != 0 {
		t.Fatalf("replaced at the failure itself (%d live); the default has a delay", n)
	}
	if len(h.planner.created) == 0 {
		return -1
	}
	f := h.planner.created[0]
	if len(h.planner.created) != 1 || f.TriggeredBy != structs.EvalTriggerRescheduleLater {
		t.Fatalf("created %d evals (first %+v), want one reschedule-later", len(h.planner.created), f)
	}
	h.process(f)
	if now := h.state.liveAllocs("j"); len(now) != 1 || now[0].PreviousAllocation != live[0].ID {
		t.Fatalf("after the follow-up: live %v, want the replacement of %s", names(now), live[0].ID)
	}
	return time.Duration(f.WaitUntil - failAt)
}

// TestDefaultReschedulePolicy checks the policies a group without a
// reschedule block gets from Canonicalize, through the scheduler: a
// service allocation that fails at once, again and again, is replaced
// 30 s after its first failure, then after twice as long each time, never
// more than 1 hour (Nomad's service default); a batch allocation is
// replaced once, 5 s after failing, and not after a second failure within
// 24 hours (Nomad's batch default).
func TestDefaultReschedulePolicy(t *testing.T) {
	s := time.Second
	cases := []struct {
		typ  string
		want []time.Duration // delay before each replacement; -1: none
	}{
		{structs.JobTypeService, []time.Duration{30 * s, 60 * s, 120 * s, 240 * s, 480 * s, 960 * s, 1920 * s, time.Hour, time.Hour}},
		{structs.JobTypeBatch, []time.Duration{5 * s, -1}},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n1", 0, "", 0))
			job := gpuJob("j", tc.typ, 1, 0, 100, 100) // Canonicalize gives it the default
			if rp := job.TaskGroups[0].ReschedulePolicy; rp == nil || *rp != *structs.DefaultReschedulePolicy(tc.typ) {
				t.Fatalf("reschedule policy %+v, want the %s default", rp, tc.typ)
			}
			h.register(job)
			at := int64(1000 * time.Second)
			for i, want := range tc.want {
				got := failAndReschedule(t, h, at)
				if got != want {
					t.Fatalf("failure %d: replaced after %s, want %s", i+1, got, want)
				}
				at += int64(got) + int64(s) // the replacement fails a second after it is placed
			}
		})
	}
}
