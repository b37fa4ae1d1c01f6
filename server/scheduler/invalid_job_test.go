package scheduler

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestInvalidCountFailsEval checks that a stored job whose counts break the
// limits (as one registered by an older build could) is not planned: its
// evaluation fails with a description naming the group and field, no
// allocation is placed and no follow-up evaluation is created; stopping
// it still stops its allocations.
func TestInvalidCountFailsEval(t *testing.T) {
	cases := []struct {
		name   string
		counts []int
		want   string
	}{
		{"1e9 in one group", []int{1_000_000_000}, `group "g0": count: must be at most 100000, got 1000000000`},
		{"total across groups, the running group included", []int{structs.MaxGroupCount - 1, 1}, "count: the groups ask for 100001 allocations in all, at most 100000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n1", 4, h100, 81559))
			job := gpuJob("j", structs.JobTypeBatch, 1, 0, 100, 64)
			job.TaskGroups[0].Name = "running"
			if ev := h.register(job); ev.Status != structs.EvalStatusComplete || len(h.state.liveAllocs("j")) != 1 {
				t.Fatalf("valid version: status %q, live %d", ev.Status, len(h.state.liveAllocs("j")))
			}
			bad := job.Copy()
			for i, c := range tc.counts {
				tg := job.TaskGroups[0].Copy()
				tg.Name = "g" + string(rune('0'+i))
				tg.Count = c
				bad.TaskGroups = append(bad.TaskGroups, tg)
			}
			ev := h.register(bad)
			if ev.Status != structs.EvalStatusFailed {
				t.Fatalf("status %q, want failed", ev.Status)
			}
			if !strings.HasPrefix(ev.StatusDescription, descInvalidJob) || !strings.Contains(ev.StatusDescription, tc.want) {
				t.Fatalf("description %q, want %q and %q", ev.StatusDescription, descInvalidJob, tc.want)
			}
			if n := len(h.state.byJob["j"]); n != 1 {
				t.Fatalf("%d allocations after the invalid version, want the 1 of the valid one", n)
			}
			if len(h.planner.created) != 0 || len(h.planner.plans) != 1 {
				t.Fatalf("created %d evals and submitted %d plans, want 0 and 1", len(h.planner.created), len(h.planner.plans))
			}
			if ev := h.stop("j"); ev.Status != structs.EvalStatusComplete || len(h.state.liveAllocs("j")) != 0 {
				t.Fatalf("stop: status %q, live %d", ev.Status, len(h.state.liveAllocs("j")))
			}
		})
	}
}
