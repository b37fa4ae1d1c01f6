package scheduler

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestScaleDownStopsLeastUseful (issue 11 item 5) checks that lowering a
// group's count gives up the failed and least useful allocations first: a
// failed allocation with no reschedule left, then a migrating one, then a
// pending one, before a running one. The allocations that keep running are
// never replaced.
func TestScaleDownStopsLeastUseful(t *testing.T) {
	noResched := &structs.ReschedulePolicy{Attempts: 0, Interval: time.Hour}
	cases := []struct {
		name   string
		typ    string
		count  int
		status []string // per index: the client status before the scale-down
		// migrate marks indexes whose node drains.
		migrate  []int
		newCount int
		// wantLive are the indexes (of the original allocations) still
		// live afterwards; wantPlaced new placements.
		wantLive   []int
		wantPlaced int
	}{
		{"service failed index kept, running one stopped (the report)", structs.JobTypeService, 3,
			[]string{"running", "failed", "running"}, nil, 2, []int{0, 2}, 0},
		{"batch failed index", structs.JobTypeBatch, 3,
			[]string{"running", "failed", "running"}, nil, 2, []int{0, 2}, 0},
		{"pending goes before running", structs.JobTypeService, 3,
			[]string{"running", "pending", "running"}, nil, 2, []int{0, 2}, 0},
		{"migrating goes before pending", structs.JobTypeService, 3,
			[]string{"pending", "running", "running"}, []int{1}, 2, []int{0, 2}, 0},
		{"all running: the highest index goes", structs.JobTypeService, 4,
			[]string{"running", "running", "running", "running"}, nil, 2, []int{0, 1}, 0},
		{"two failed, count to 1", structs.JobTypeService, 4,
			[]string{"failed", "running", "failed", "running"}, nil, 1, []int{1}, 0},
		{"failed index stays failed without a scale-down", structs.JobTypeService, 3,
			[]string{"running", "failed", "running"}, nil, 3, []int{0, 2}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n", 8, h100, 81559))
			job := gpuJob("j", tc.typ, tc.count, 1, 100, 128)
			job.TaskGroups[0].ReschedulePolicy = noResched
			h.register(job)
			orig := map[int]*structs.Allocation{}
			for _, a := range h.state.liveAllocs("j") {
				orig[a.Index()] = a
			}
			for idx, st := range tc.status {
				h.state.setClientStatus(st, orig[idx])
			}
			// The failures are processed at the old count: nothing is
			// rescheduled.
			h.process(newEval(h.state.jobs["j"], structs.EvalTriggerNodeUpdate))
			for _, idx := range tc.migrate {
				c := h.state.allocs[orig[idx].ID].Copy()
				c.DesiredTransition.Migrate = true
				h.state.upsertAlloc(c)
			}
			job.TaskGroups[0].Count = tc.newCount
			ev := h.register(job)
			if ev.Status != structs.EvalStatusComplete {
				t.Fatalf("eval %q %q", ev.Status, ev.StatusDescription)
			}
			var gotLive []int
			placed := 0
			for _, a := range h.state.liveAllocs("j") {
				if a.DesiredTransition.Migrate {
					continue
				}
				found := false
				for idx, o := range orig {
					if o.ID == a.ID {
						gotLive = append(gotLive, idx)
						found = true
					}
				}
				if !found {
					placed++
				}
			}
			sort.Ints(gotLive)
			if !slices.Equal(gotLive, tc.wantLive) || placed != tc.wantPlaced {
				t.Fatalf("live originals %v and %d placed, want %v and %d", gotLive, placed, tc.wantLive, tc.wantPlaced)
			}
			// A second evaluation changes nothing: the choice is stable.
			before := len(h.state.allocs)
			ev = h.process(newEval(h.state.jobs["j"], structs.EvalTriggerNodeUpdate))
			if len(h.state.allocs) != before || ev.BlockedEval != "" {
				t.Fatalf("a second evaluation placed again (%d -> %d allocations)", before, len(h.state.allocs))
			}
			for _, a := range h.state.liveAllocs("j") {
				if !a.DesiredTransition.Migrate && !slices.Contains(gotLive, indexOf(orig, a)) {
					t.Fatalf("a second evaluation changed the live set: %s", a.Name)
				}
			}
			checkInvariants(t, h.state)
		})
	}
}

func indexOf(orig map[int]*structs.Allocation, a *structs.Allocation) int {
	for idx, o := range orig {
		if o.ID == a.ID {
			return idx
		}
	}
	return -1
}
