package scheduler

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestPromotedEndpointExcludesOpportunisticNodes places an endpoint group
// that opts in to opportunistic nodes: with no alias promoted it may use
// the only (opportunistic) node; once an alias is promoted onto its
// endpoint the node is filtered out with a reason naming the endpoint and
// the alias, and a continuous node added later takes it.
func TestPromotedEndpointExcludesOpportunisticNodes(t *testing.T) {
	endpointJob := func(id string) *structs.Job {
		j := gpuJob(id, structs.JobTypeService, 2, 0, 100, 128)
		j.TaskGroups[0].Availability = structs.AvailabilityOpportunistic
		j.TaskGroups[0].Endpoint = &structs.Endpoint{Name: "llm-70b", Port: 9000, Model: "m"}
		return j
	}
	opp := gpuNode("laptop", 0, h100, 0)
	opp.Availability = structs.AvailabilityOpportunistic

	t.Run("not promoted", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(opp.Copy())
		ev := h.register(endpointJob("j"))
		if len(ev.FailedTGAllocs) != 0 || len(h.state.liveAllocs("j")) != 2 {
			t.Fatalf("failed %v, live %d", ev.FailedTGAllocs, len(h.state.liveAllocs("j")))
		}
	})
	t.Run("promoted", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(opp.Copy())
		h.state.aliases = []*structs.EndpointAlias{{Namespace: "default", Name: "llm.primary", Endpoint: "llm-70b", JobID: "j"}}
		ev := h.register(endpointJob("j"))
		m := ev.FailedTGAllocs["g"]
		const reason = "endpoint llm-70b is promoted (alias llm.primary): opportunistic nodes excluded"
		if m == nil || m.ConstraintFiltered[reason] != 1 {
			t.Fatalf("FailedTGAllocs = %+v, want ConstraintFiltered[%q] = 1", m, reason)
		}
		if n := len(h.state.liveAllocs("j")); n != 0 {
			t.Fatalf("%d allocations placed on the opportunistic node", n)
		}
		// Another namespace's alias of the same name does not count.
		h2 := newHarness(t)
		h2.state.upsertNode(opp.Copy())
		h2.state.aliases = []*structs.EndpointAlias{{Namespace: "prod", Name: "llm.primary", Endpoint: "llm-70b", JobID: "j"}}
		if ev := h2.register(endpointJob("j")); len(ev.FailedTGAllocs) != 0 {
			t.Fatalf("an alias of another namespace excluded the node: %v", ev.FailedTGAllocs)
		}
		// A continuous node takes the promoted endpoint.
		h.state.upsertNode(gpuNode("server", 0, h100, 0))
		h.register(endpointJob("j"))
		live := h.state.liveAllocs("j")
		if len(live) != 2 {
			t.Fatalf("live allocations = %d, want 2", len(live))
		}
		for _, a := range live {
			if a.NodeID != "server" {
				t.Fatalf("allocation %s on node %s", a.ID, a.NodeID)
			}
		}
	})
}
