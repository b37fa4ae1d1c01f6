package scheduler

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestNodeReasonNamesWhatIsTrue (issue 11 item 9) checks that a node filtered
// out for its status or eligibility is counted under a reason that names what
// is true of it, never "node not ready" for a node whose status is ready.
func TestNodeReasonNamesWhatIsTrue(t *testing.T) {
	cases := []struct {
		name   string
		modify func(n *structs.Node)
		reason string
	}{
		{"draining", func(n *structs.Node) {
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
			n.DrainStrategy = &structs.DrainStrategy{Deadline: 3600e9}
		}, "node ineligible (draining)"},
		{"ineligible", func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible }, "node ineligible"},
		{"down", func(n *structs.Node) { n.Status = structs.NodeStatusDown }, "node down"},
		{"initializing", func(n *structs.Node) { n.Status = structs.NodeStatusInit }, "node initializing"},
		{"down and draining", func(n *structs.Node) {
			n.Status = structs.NodeStatusDown
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
			n.DrainStrategy = &structs.DrainStrategy{}
		}, "node down"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			n := gpuNode("n", 1, h100, 81559)
			tc.modify(n)
			h.state.upsertNode(n)
			ev := h.register(gpuJob("j", structs.JobTypeService, 1, 1, 100, 128))
			m := ev.FailedTGAllocs["g"]
			if m == nil || m.ConstraintFiltered[tc.reason] != 1 {
				t.Fatalf("ConstraintFiltered = %v, want %q: 1", m.ConstraintFiltered, tc.reason)
			}
			// job status and job queue show the explanation.
			if want := "1 node: " + tc.reason; m.Explain() != want {
				t.Fatalf("Explain() = %q, want %q", m.Explain(), want)
			}
			if got := n.NotReadyReason(); got != tc.reason {
				t.Fatalf("NotReadyReason() = %q, want %q", got, tc.reason)
			}
		})
	}
}
