package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// endpointJob returns a service job whose group "llm" of count members
// (cpu MHz and mem MiB each, one dynamic port "http") declares endpoint
// name on port; failed members are replaced at once.
func endpointJob(id, name string, port, count, cpu, mem int) *structs.Job {
	j := gpuJob(id, structs.JobTypeService, count, 0, cpu, mem)
	tg := j.TaskGroups[0]
	tg.Name = "llm"
	tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
	tg.Endpoint = &structs.Endpoint{Name: name, Port: port, Model: "m"}
	tg.ReschedulePolicy = &structs.ReschedulePolicy{Unlimited: true, DelayFunction: "constant"}
	if err := j.Validate(); err != nil {
		panic(err)
	}
	return j
}

// endpointNode is a ready node with cpu MHz for allocations (after its
// 1000 MHz reserve) and a dynamic port range around 9000, so the test sees
// that no member's dynamic port takes the endpoint's.
func endpointNode(id string, cpu int64) *structs.Node {
	n := gpuNode(id, 0, "", 0)
	n.NodeResources.CPU = cpu + 1000
	n.NodeResources.MinDynamicPort, n.NodeResources.MaxDynamicPort = 8990, 9010
	return n
}

// membersByNode returns the job's live allocations grouped by node ID.
func membersByNode(s *fakeState, jobID string) map[string][]*structs.Allocation {
	out := map[string][]*structs.Allocation{}
	for _, a := range s.liveAllocs(jobID) {
		out[a.NodeID] = append(out[a.NodeID], a)
	}
	return out
}

// onlyNode fails unless the job's live allocations number want and all run
// on one node, each holding the endpoint's port and a dynamic port that is
// not it; it returns that node's ID.
func onlyNode(t *testing.T, s *fakeState, jobID string, want int) string {
	t.Helper()
	by := membersByNode(s, jobID)
	if len(by) != 1 {
		t.Fatalf("members on %d nodes, want 1: %v", len(by), nodeNames(by))
	}
	for id, list := range by {
		if len(list) != want {
			t.Fatalf("%d members on %s, want %d", len(list), id, want)
		}
		for _, a := range list {
			sh := a.AllocatedResources.Shared
			if sh == nil || sh.Endpoint == nil || sh.Endpoint.Port != 9000 || len(sh.Ports) != 1 || sh.Ports[0].Value == 9000 {
				t.Fatalf("member %s shared resources %+v", a.Name, sh)
			}
		}
		return id
	}
	return ""
}

func nodeNames(by map[string][]*structs.Allocation) map[string][]string {
	out := map[string][]string{}
	for id, list := range by {
		for _, a := range list {
			out[id] = append(out[id], a.Name)
		}
	}
	return out
}

// TestEndpointMembersOnOneNode: three members land on one node even
// though spreading them would fit too; a group without an endpoint on the
// same nodes is placed as before.
func TestEndpointMembersOnOneNode(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		h.state.upsertNode(endpointNode(id, 4000))
	}
	ev := h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
	if len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("failed: %+v", ev.FailedTGAllocs["llm"])
	}
	onlyNode(t, h.state, "serve", 3)
	checkInvariants(t, h.state)
}

// TestEndpointNoNodeFitsAll: each node has room for two of three members:
// nothing is placed, and the evaluation, its blocked evaluation and the
// plan's failure say that no node fits all three, with the per-node
// reasons.
func TestEndpointNoNodeFitsAll(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 2000))
	h.state.upsertNode(endpointNode("n2", 2000))
	down := endpointNode("n3", 8000)
	down.Status = structs.NodeStatusDown
	h.state.upsertNode(down)
	ev := h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
	if n := len(h.state.liveAllocs("serve")); n != 0 {
		t.Fatalf("%d members placed, want none", n)
	}
	m := ev.FailedTGAllocs["llm"]
	if m == nil || ev.QueuedAllocations["llm"] != 3 {
		t.Fatalf("failed %+v queued %v", m, ev.QueuedAllocations)
	}
	for _, want := range []string{
		"endpoint llm-70b: no node fits all 3 members: ",
		"2 nodes: not enough free CPU", "1: node down",
		"node name-n1 has room for 2 (not enough free CPU)", "node name-n2 has room for 2",
	} {
		if !strings.Contains(m.Explanation, want) {
			t.Errorf("explanation %q lacks %q", m.Explanation, want)
		}
	}
	if len(h.planner.created) != 1 || h.planner.created[0].Status != structs.EvalStatusBlocked ||
		h.planner.created[0].FailedTGAllocs["llm"].Explanation != m.Explanation {
		t.Fatalf("blocked eval %+v", h.planner.created)
	}
	// Room on one node: the blocked evaluation places all three there.
	n1 := endpointNode("n1", 4000)
	h.state.upsertNode(n1)
	blocked := h.planner.created[0]
	if ev := h.process(blocked); len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("reprocessed: %+v", ev.FailedTGAllocs["llm"])
	}
	if id := onlyNode(t, h.state, "serve", 3); id != "n1" {
		t.Fatalf("placed on %s, want n1", id)
	}
	checkInvariants(t, h.state)
}

// TestEndpointReplacementKeepsNode: a failed or lost member is replaced
// on the node the other members run on, though bin-packing ranks another
// node higher; with no room left there it is not placed elsewhere, and the
// reason names the node.
func TestEndpointReplacementKeepsNode(t *testing.T) {
	for _, status := range []string{structs.AllocClientStatusFailed, structs.AllocClientStatusLost} {
		t.Run(status, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(endpointNode("n1", 4000))
			h.state.upsertNode(endpointNode("n2", 4000))
			h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
			home := onlyNode(t, h.state, "serve", 3)
			other := "n1"
			if home == "n1" {
				other = "n2"
			}
			// Fill the other node so bin-packing prefers it.
			filler := gpuJob("filler", structs.JobTypeService, 1, 0, 2500, 100)
			filler.Constraints = append(filler.Constraints, &structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: other})
			h.register(filler)
			members := h.state.liveAllocs("serve")
			h.state.setClientStatus(structs.AllocClientStatusRunning, members...)
			h.state.setClientStatus(status, members[1])
			ev := h.process(newEval(h.state.jobs["serve"], structs.EvalTriggerAllocStop))
			if len(ev.FailedTGAllocs) != 0 {
				t.Fatalf("failed: %+v", ev.FailedTGAllocs["llm"])
			}
			if id := onlyNode(t, h.state, "serve", 3); id != home {
				t.Fatalf("members moved to %s, want %s", id, home)
			}
			var repl *structs.Allocation
			for _, a := range h.state.liveAllocs("serve") {
				if a.PreviousAllocation == members[1].ID {
					repl = a
				}
			}
			if repl == nil || repl.Name != members[1].Name {
				t.Fatalf("no replacement of %s", members[1].Name)
			}
			checkInvariants(t, h.state)

			// The replacement fails too and another job takes its room
			// at home: the next replacement is not placed on the other
			// node (which has room), and the reason says why.
			hog := gpuJob("hog", structs.JobTypeService, 1, 0, 2000, 100)
			hog.Constraints = append(hog.Constraints, &structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: home})
			h.state.setClientStatus(status, repl)
			h.register(hog)
			ev = h.process(newEval(h.state.jobs["serve"], structs.EvalTriggerAllocStop))
			m := ev.FailedTGAllocs["llm"]
			want := "endpoint llm-70b: node name-" + home + ", where its 2 other members run, cannot take 1 more: not enough free CPU"
			if m == nil || m.Explanation != want {
				t.Fatalf("failure %+v, want %q", m, want)
			}
			if by := membersByNode(h.state, "serve"); len(by) != 1 || len(by[home]) != 2 {
				t.Fatalf("members %v", nodeNames(by))
			}
		})
	}
}

// TestEndpointNodeLostMovesAll: when the members' node goes down and its
// allocations are lost, all members are placed together on one other
// node.
func TestEndpointNodeLostMovesAll(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		h.state.upsertNode(endpointNode(id, 4000))
	}
	h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
	home := onlyNode(t, h.state, "serve", 3)
	members := h.state.liveAllocs("serve")
	down := h.state.nodes[home].Copy()
	down.Status = structs.NodeStatusDown
	h.state.upsertNode(down)
	h.state.setClientStatus(structs.AllocClientStatusLost, members...)
	ev := h.process(newEval(h.state.jobs["serve"], structs.EvalTriggerNodeUpdate))
	if len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("failed: %+v", ev.FailedTGAllocs["llm"])
	}
	if id := onlyNode(t, h.state, "serve", 3); id == home {
		t.Fatalf("members still on the lost node %s", id)
	}
	checkInvariants(t, h.state)
}

// TestEndpointDrainMovesAll: a drain that marks one member for migration
// moves the whole set: its replacement and the other two members' are
// placed together on another node, and the two are stopped.
func TestEndpointDrainMovesAll(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 4000))
	h.state.upsertNode(endpointNode("n2", 4000))
	h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
	home := onlyNode(t, h.state, "serve", 3)
	members := h.state.liveAllocs("serve")
	h.state.setClientStatus(structs.AllocClientStatusRunning, members...)
	draining := h.state.nodes[home].Copy()
	draining.SchedulingEligibility = structs.NodeSchedulingIneligible
	draining.DrainStrategy = &structs.DrainStrategy{}
	h.state.upsertNode(draining)
	h.state.index++
	m := h.state.allocs[members[0].ID].Copy()
	m.DesiredTransition.Migrate = true
	h.state.upsertAlloc(m)
	ev := h.process(newEval(h.state.jobs["serve"], structs.EvalTriggerNodeUpdate))
	if len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("failed: %+v", ev.FailedTGAllocs["llm"])
	}
	plan := h.planner.plans[len(h.planner.plans)-1]
	var placed int
	for id, list := range plan.NodeAllocation {
		if id == home {
			t.Fatalf("placed on the draining node")
		}
		placed += len(list)
	}
	stops := plan.NodeUpdate[home]
	if placed != 3 || len(stops) != 2 {
		t.Fatalf("placed %d, stopped %d; want 3 and 2", placed, len(stops))
	}
	for _, s := range stops {
		if s.ID == members[0].ID || s.DesiredDescription != descEndpointMove {
			t.Fatalf("stop %s %q", s.Name, s.DesiredDescription)
		}
	}
	checkInvariants(t, h.state)
}

// TestEndpointScaleUp: a larger count adds members on the home node; past
// the node's room nothing is added and the reason says so.
func TestEndpointScaleUp(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 4000))
	h.state.upsertNode(endpointNode("n2", 4000))
	job := endpointJob("serve", "llm-70b", 9000, 3, 1000, 100)
	h.register(job)
	home := onlyNode(t, h.state, "serve", 3)
	job.TaskGroups[0].Count = 4
	if ev := h.register(job); len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("scale to 4: %+v", ev.FailedTGAllocs["llm"])
	}
	if id := onlyNode(t, h.state, "serve", 4); id != home {
		t.Fatalf("scaled onto %s, want %s", id, home)
	}
	job.TaskGroups[0].Count = 6
	ev := h.register(job)
	m := ev.FailedTGAllocs["llm"]
	if m == nil || ev.QueuedAllocations["llm"] != 2 || !strings.Contains(m.Explanation, "cannot take 2 more: not enough free CPU") {
		t.Fatalf("scale to 6: %+v queued %v", m, ev.QueuedAllocations)
	}
	onlyNode(t, h.state, "serve", 4)
	checkInvariants(t, h.state)
}

// TestEndpointPortCollisions: a node whose endpoint port is a static task
// port of another job, or another endpoint's port, is not the endpoint's
// node; a later task asking for a static port an endpoint holds goes
// elsewhere; and a dynamic port never takes an endpoint's port.
func TestEndpointPortCollisions(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 8000))
	h.state.upsertNode(endpointNode("n2", 8000))
	static := portJob("web", 1, &structs.NetworkResource{ReservedPorts: []structs.Port{{Label: "http", Value: 9000}}})
	static.Constraints = append(static.Constraints, &structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: "n1"})
	h.register(static)
	h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
	if id := onlyNode(t, h.state, "serve", 3); id != "n2" {
		t.Fatalf("endpoint on %s, want n2 (n1's port 9000 is a task's)", id)
	}
	// A second endpoint on port 9000: n1 has a task on it, n2 the first
	// endpoint; no node fits.
	ev := h.register(endpointJob("serve2", "llm-8b", 9000, 2, 1000, 100))
	m := ev.FailedTGAllocs["llm"]
	if m == nil || !strings.Contains(m.Explanation, "endpoint llm-8b: no node fits all 2 members: 2 nodes: network: endpoint port collision 9000") {
		t.Fatalf("second endpoint: %+v", m)
	}
	// A static port 9000 on n2 is taken by the endpoint.
	static2 := portJob("web2", 1, &structs.NetworkResource{ReservedPorts: []structs.Port{{Label: "http", Value: 9000}}})
	static2.Constraints = append(static2.Constraints, &structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: "n2"})
	ev = h.register(static2)
	if m := ev.FailedTGAllocs["g"]; m == nil || m.DimensionExhausted[dimPortCollision+" http=9000"] != 1 {
		t.Fatalf("static port on the endpoint's node: %+v", m)
	}
	// Dynamic ports fill n2's range around the endpoint's port, never
	// taking it: 21 ports, 3 members and the endpoint hold 4.
	dyn := portJob("dyn", 17, &structs.NetworkResource{DynamicPorts: []structs.Port{{Label: "p"}}})
	dyn.Constraints = append(dyn.Constraints, &structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: "n2"})
	if ev := h.register(dyn); len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("dynamic: %+v", ev.FailedTGAllocs["g"])
	}
	dyn.ID = "dyn2"
	dyn.TaskGroups[0].Count = 1
	if ev := h.register(dyn); ev.FailedTGAllocs["g"] == nil || ev.FailedTGAllocs["g"].DimensionExhausted[dimDynamicPorts] != 1 {
		t.Fatalf("the range is full, but dyn2 was placed: %+v", ev.FailedTGAllocs)
	}
	checkInvariants(t, h.state)
}

// TestEndpointJobUpdateMovesTogether: a destructive update replaces every
// member at once; the new members are placed together, on the node the old
// ones ran on when it has room for both.
func TestEndpointJobUpdateMovesTogether(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 8000))
	h.state.upsertNode(endpointNode("n2", 8000))
	job := endpointJob("serve", "llm-70b", 9000, 3, 1000, 100)
	h.register(job)
	home := onlyNode(t, h.state, "serve", 3)
	job.TaskGroups[0].Tasks[0].Config = map[string]interface{}{"command": "/bin/false"}
	if ev := h.register(job); len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("update: %+v", ev.FailedTGAllocs["llm"])
	}
	var newOnes []*structs.Allocation
	for _, a := range h.state.liveAllocs("serve") {
		if a.Job.JobModifyIndex == h.state.jobs["serve"].JobModifyIndex {
			newOnes = append(newOnes, a)
		}
	}
	if len(newOnes) != 3 {
		t.Fatalf("%d new members, want 3", len(newOnes))
	}
	for _, a := range newOnes {
		if a.NodeID != home {
			t.Fatalf("new member %s on %s, want %s", a.Name, a.NodeID, home)
		}
	}
	checkInvariants(t, h.state)
}

// TestEndpointRollingUpdateStaysHome: with an update block replacing one
// member at a time, each new member is placed on the node the others run
// on, though bin-packing ranks another node higher.
func TestEndpointRollingUpdateStaysHome(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 8000))
	h.state.upsertNode(endpointNode("n2", 8000))
	job := endpointJob("serve", "llm-70b", 9000, 3, 1000, 100)
	job.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
		MinHealthyTime: time.Second, HealthyDeadline: time.Minute}
	h.register(job)
	home := onlyNode(t, h.state, "serve", 3)
	h.state.setClientStatus(structs.AllocClientStatusRunning, h.state.liveAllocs("serve")...)
	// Fill the other node so bin-packing prefers it.
	other := "n1"
	if home == "n1" {
		other = "n2"
	}
	filler := gpuJob("filler", structs.JobTypeService, 1, 0, 5000, 100)
	filler.Constraints = append(filler.Constraints, &structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: other})
	h.register(filler)
	job.TaskGroups[0].Tasks[0].Config = map[string]interface{}{"command": "/bin/false"}
	if ev := h.register(job); len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("update: %+v", ev.FailedTGAllocs["llm"])
	}
	plan := h.planner.plans[len(h.planner.plans)-1]
	if len(plan.NodeAllocation) != 1 || len(plan.NodeAllocation[home]) != 1 || len(plan.NodeUpdate[home]) != 1 {
		t.Fatalf("rolling step placed %v stopped %v, want one of each on %s", plan.NodeAllocation, plan.NodeUpdate, home)
	}
	onlyNode(t, h.state, "serve", 3)
	checkInvariants(t, h.state)
}

// TestEndpointDrainNoRoomStopsNothing: a drain whose members fit on no
// other node stops none of them; the reason says no node fits them all.
func TestEndpointDrainNoRoomStopsNothing(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 4000))
	h.register(endpointJob("serve", "llm-70b", 9000, 3, 1000, 100))
	h.state.upsertNode(endpointNode("n2", 2000))
	members := h.state.liveAllocs("serve")
	h.state.setClientStatus(structs.AllocClientStatusRunning, members...)
	draining := h.state.nodes["n1"].Copy()
	draining.SchedulingEligibility = structs.NodeSchedulingIneligible
	draining.DrainStrategy = &structs.DrainStrategy{}
	h.state.upsertNode(draining)
	h.state.index++
	m := h.state.allocs[members[0].ID].Copy()
	m.DesiredTransition.Migrate = true
	h.state.upsertAlloc(m)
	ev := h.process(newEval(h.state.jobs["serve"], structs.EvalTriggerNodeUpdate))
	f := ev.FailedTGAllocs["llm"]
	if f == nil || !strings.Contains(f.Explanation, "endpoint llm-70b: no node fits all 3 members: ") ||
		!strings.Contains(f.Explanation, "node name-n2 has room for 2") {
		t.Fatalf("failure %+v", f)
	}
	if n := len(h.state.liveAllocs("serve")); n != 3 {
		t.Fatalf("%d members left running, want all 3", n)
	}
	for _, p := range h.planner.plans[1:] {
		if len(p.NodeUpdate) != 0 {
			t.Fatalf("a plan stopped members: %v", p.NodeUpdate)
		}
	}
}

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

// TestEndpointUpdateAwaitsStops: a destructive update on a node with no
// room for old and new members at once stops the old ones and waits for
// them (AwaitingStops covers every member, so `job run` does not report a
// failure); once they are gone the blocked evaluation places the new ones
// there together.
func TestEndpointUpdateAwaitsStops(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(endpointNode("n1", 4000))
	job := endpointJob("serve", "llm-70b", 9000, 3, 1000, 100)
	h.register(job)
	old := h.state.liveAllocs("serve")
	h.state.setClientStatus(structs.AllocClientStatusRunning, old...)
	job.TaskGroups[0].Tasks[0].Config = map[string]interface{}{"command": "/bin/false"}
	ev := h.register(job)
	m := ev.FailedTGAllocs["llm"]
	if m == nil || m.AwaitingStops != 3 ||
		!strings.Contains(m.Explanation, "all 3 fit on node name-n1 once allocations being stopped release their resources") {
		t.Fatalf("failure %+v", m)
	}
	blocked := h.planner.created[len(h.planner.created)-1]
	h.state.setClientStatus(structs.AllocClientStatusComplete, old...)
	if ev := h.process(blocked); len(ev.FailedTGAllocs) != 0 {
		t.Fatalf("blocked eval: %+v", ev.FailedTGAllocs["llm"])
	}
	if id := onlyNode(t, h.state, "serve", 3); id != "n1" {
		t.Fatalf("placed on %s", id)
	}
	checkInvariants(t, h.state)
}
