package fsm

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// endpointJob returns a service job whose group "web" of count 2 declares
// endpoint name.
func endpointJob(name string) *structs.Job {
	job := statetest.Job()
	tg := job.TaskGroups[0]
	tg.Count = 2
	tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
	tg.Endpoint = &structs.Endpoint{Name: name, Port: 9000, Model: "m"}
	return job
}

// TestApplyEndpointAliases applies the two endpoint alias messages: a
// promotion, a move to a second endpoint at one index, refusals that
// change nothing (an opportunistic node, an endpoint nobody declares), a
// snapshot round trip, and a demotion.
func TestApplyEndpointAliases(t *testing.T) {
	tf := newTestFSM(t)
	node, opp := statetest.Node(0), statetest.Node(0)
	opp.Availability = structs.AvailabilityOpportunistic
	a, b, c := endpointJob("llm-a"), endpointJob("llm-b"), endpointJob("llm-opp")
	c.TaskGroups[0].Availability = structs.AvailabilityOpportunistic
	var idx uint64
	apply := func(mt structs.MessageType, msg interface{}) interface{} {
		t.Helper()
		idx++
		return tf.applyMsg(t, idx, mt, msg)
	}
	mustApply := func(mt structs.MessageType, msg interface{}) {
		t.Helper()
		if resp := apply(mt, msg); resp != nil {
			t.Fatalf("%s: %v", mt, resp)
		}
	}
	mustApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node})
	mustApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: opp})
	for _, j := range []*structs.Job{a, b, c} {
		mustApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: j, Eval: statetest.Eval(j)})
	}
	mustApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{UpdatedAt: 1,
		AllocsPlaced: []*structs.Allocation{statetest.Alloc(a, node), statetest.Alloc(b, node), statetest.Alloc(c, opp)}})

	alias := func(endpoint string, job *structs.Job) *structs.EndpointAliasPromoteRequest {
		return &structs.EndpointAliasPromoteRequest{Alias: &structs.EndpointAlias{Namespace: "default", Name: "llm.primary",
			Endpoint: endpoint, JobID: job.ID, PromotedBy: "anonymous", PromotedAt: 1_700_000_000_000_000_000 + int64(idx)}}
	}
	resolves := func() []string {
		t.Helper()
		var out []string
		for _, ep := range []string{"llm-a", "llm-b", "llm-opp"} {
			as, err := tf.State().EndpointAliasesByEndpoint(nil, "default", ep)
			if err != nil {
				t.Fatal(err)
			}
			for range as {
				out = append(out, ep)
			}
		}
		return out
	}

	mustApply(structs.EndpointAliasPromoteRequestType, alias("llm-a", a))
	first := idx
	if got := resolves(); len(got) != 1 || got[0] != "llm-a" {
		t.Fatalf("after promote: alias resolves to %v", got)
	}
	mustApply(structs.EndpointAliasPromoteRequestType, alias("llm-b", b))
	if got := resolves(); len(got) != 1 || got[0] != "llm-b" {
		t.Fatalf("after move: alias resolves to %v", got)
	}
	stored, _ := tf.State().EndpointAlias(nil, "default", "llm.primary")
	if stored.CreateIndex != first || stored.ModifyIndex != idx || stored.JobID != b.ID || stored.PromotedBy != "anonymous" {
		t.Fatalf("stored alias = %+v", stored)
	}
	if got, _ := tf.State().Index("endpoint_aliases"); got != idx {
		t.Fatalf("table index = %d, want %d", got, idx)
	}

	refusals := []struct {
		name string
		msg  interface{}
		want error
	}{
		{"opportunistic node", alias("llm-opp", c), structs.ErrEndpointOpportunistic},
		{"endpoint not declared by the job", alias("llm-x", a), structs.ErrNotFound},
		{"without alias", &structs.EndpointAliasPromoteRequest{}, structs.ErrInvalid},
		{"bad alias name", &structs.EndpointAliasPromoteRequest{Alias: &structs.EndpointAlias{Namespace: "default", Name: "LLM", Endpoint: "llm-a", JobID: a.ID, PromotedBy: "x", PromotedAt: 1}}, structs.ErrInvalid},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			before := tf.hash(t)
			resp := apply(structs.EndpointAliasPromoteRequestType, r.msg)
			if err, _ := resp.(error); !errors.Is(err, r.want) {
				t.Fatalf("response = %v, want %v", resp, r.want)
			}
			if tf.hash(t) != before {
				t.Fatal("a refused promotion changed the state")
			}
		})
	}

	restored := newTestFSM(t)
	if err := restoreBytes(restored.FSM, snapshotBytes(t, tf.FSM)); err != nil {
		t.Fatal(err)
	}
	if got, _ := restored.State().EndpointAlias(nil, "default", "llm.primary"); got == nil || *got != *stored {
		t.Fatalf("restored alias = %+v, want %+v", got, stored)
	}
	if restored.hash(t) != tf.hash(t) {
		t.Fatal("restored state hash differs")
	}

	mustApply(structs.EndpointAliasDeleteRequestType, &structs.EndpointAliasDeleteRequest{Namespace: "default", Name: "llm.primary"})
	if got := resolves(); len(got) != 0 {
		t.Fatalf("after demote: alias resolves to %v", got)
	}
	if resp := apply(structs.EndpointAliasDeleteRequestType, &structs.EndpointAliasDeleteRequest{Namespace: "default", Name: "llm.primary"}); !errors.Is(resp.(error), structs.ErrNotFound) {
		t.Fatalf("second demote = %v, want not found", resp)
	}
}
