package command

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// TestJobRunAwaitingStopsIsNotAFailure (issue 11 item 6) checks that `job
// run` does not report "failed to place" when the only allocations left
// wait for allocations being stopped to release their GPUs (a destructive
// update on a node with no spare GPU): it follows the blocked evaluation
// and exits 0 once that places them. When the re-evaluation then lacks
// capacity, it fails as before.
func TestJobRunAwaitingStopsIsNotAFailure(t *testing.T) {
	const evalID, blockedID = "4d4d4d4d-0000-0000-0000-000000000000", "5e5e5e5e-0000-0000-0000-000000000000"
	awaiting := map[string]*api.AllocMetric{"gpu": {
		NodesEvaluated: 1, NodesExhausted: 1, AwaitingStops: 1,
		DimensionExhausted: map[string]int{"devices: nvidia/gpu": 1},
	}}
	lacking := map[string]*api.AllocMetric{"gpu": {
		NodesEvaluated: 1, NodesExhausted: 1,
		DimensionExhausted: map[string]int{"devices: nvidia/gpu": 1},
	}}
	cases := []struct {
		name    string
		later   *api.Evaluation // the blocked evaluation once re-evaluated
		code    int
		outHas  string
		outLack string
	}{
		{"placed once the old allocation stopped", &api.Evaluation{ID: blockedID, JobID: "hello-gpu", Status: "complete", ModifyIndex: 12},
			0, "for allocations being stopped to release their resources", "failed to place"},
		{"re-evaluation lacks capacity", &api.Evaluation{ID: blockedID, JobID: "hello-gpu", Status: "blocked", ModifyIndex: 12, FailedTGAllocs: lacking},
			2, "failed to place", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI()
			f.registerEval = evalID
			f.evalSteps[evalID] = []*api.Evaluation{{
				ID: evalID, JobID: "hello-gpu", Status: "complete", BlockedEval: blockedID, ModifyIndex: 10, FailedTGAllocs: awaiting,
			}}
			f.evalSteps[blockedID] = []*api.Evaluation{
				{ID: blockedID, JobID: "hello-gpu", Status: "blocked", ModifyIndex: 11, FailedTGAllocs: awaiting},
				tc.later,
			}
			ts := f.serve(t)
			r := runCmd(t, ts.URL, "job", "run", writeFile(t, "job.hcl", goodJob))
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", r.code, tc.code, r.out, r.err)
			}
			if !strings.Contains(r.out, tc.outHas) || (tc.outLack != "" && strings.Contains(r.out, tc.outLack)) {
				t.Fatalf("output lacks %q or has %q:\n%s", tc.outHas, tc.outLack, r.out)
			}
		})
	}
}
