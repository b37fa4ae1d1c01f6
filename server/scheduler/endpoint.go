package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// Endpoint groups. Every allocation of a group with an endpoint block
// (structs.TaskGroup.Endpoint) runs on one node, the endpoint's home, behind
// the router the node's client runs on the endpoint's port. The group is
// reconciled like any other (reconcileGroup); placement differs:
//
//   - While members run on a node that takes allocations (Ready), that node
//     is home: every placement of the group (a replacement of a failed or
//     lost member, a destructive update, a scale-up, a canary) goes there,
//     all of them or none.
//   - With no live member on such a node (a first placement, the node lost
//     or drained, a destructive update of every member), the whole set is
//     placed on one node that fits every placement at once, preferring the
//     node the replaced members ran on, else the best-ranked; live members
//     left on a node that no longer takes allocations are stopped and
//     placed again with the set, so the set moves together. When no node
//     fits them all, nothing is placed and nothing is stopped; when one
//     node would fit them all once the allocations being stopped there are
//     gone (a destructive update on a full node), AwaitingStops says so and
//     the blocked evaluation places them then.
//   - Every member holds the endpoint's port on its node
//     (AllocatedSharedResources.Endpoint), shared with the other members
//     and with no one else (portUsage.endpointFits; the plan applier checks
//     again with structs.AllocsFit).
//
// An endpoint group does not preempt other work.

// descEndpointMove is the description of a live member stopped because its
// node no longer takes allocations and the whole set moves to another one.
const descEndpointMove = "endpoint moves to another node: all members are placed there together"

// maxPartialNotes bounds the nodes named in a failure as fitting only some
// of the members.
const maxPartialNotes = 3

// endpointOwner is structs.EndpointOwner of the allocations placed for tg.
func (c *evalCtx) endpointOwner(tg *structs.TaskGroup) string {
	return c.job.Namespace + "/" + c.job.ID + "/" + tg.Name
}

// placeEndpointGroup places reqs, which all belong to one endpoint group,
// on the endpoint's home node or, without one, all together on one node
// (see the comment at the top of this file).
func (c *evalCtx) placeEndpointGroup(plan *structs.Plan, reqs []placementRequest, out *attempt) error {
	tg := reqs[0].tg
	stopping := map[string]bool{}
	for _, list := range plan.NodeUpdate {
		for _, a := range list {
			stopping[a.ID] = true
		}
	}
	replaced := map[string]bool{}
	for _, r := range reqs {
		if r.previous != nil {
			replaced[r.previous.ID] = true
		}
	}
	nodes := make(map[string]*structs.Node, len(c.nodes))
	for _, n := range c.nodes {
		nodes[n.ID] = n
	}
	// live counts, per node, the members that keep running after this
	// plan; stranded are those of them on a node that takes nothing new.
	live := map[string]int{}
	var stranded []*structs.Allocation
	for _, a := range c.allocs {
		if a == nil || a.TaskGroup != tg.Name || a.DesiredStatus != structs.AllocDesiredStatusRun ||
			a.ClientTerminalStatus() || stopping[a.ID] || a.DesiredTransition.Migrate {
			continue
		}
		if n := nodes[a.NodeID]; n != nil && n.Ready() {
			live[a.NodeID]++
			continue
		}
		if !replaced[a.ID] {
			stranded = append(stranded, a)
		}
	}
	var home *structs.Node
	for id, k := range live {
		if home == nil || k > live[home.ID] || (k == live[home.ID] && id < home.ID) {
			home = nodes[id]
		}
	}
	g := c.newGroupScan(tg)
	if home != nil {
		return c.placeEndpointHome(plan, g, home, live[home.ID], reqs, out)
	}
	all := slices.Clone(reqs)
	for _, a := range stranded {
		all = append(all, placementRequest{tg: tg, index: a.Index(), previous: a, deploymentID: reqs[0].deploymentID})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].index < all[j].index })
	ok, err := c.placeEndpointSet(plan, g, all, preferredNode(all, nodes), out)
	if err != nil || !ok {
		return err
	}
	for _, a := range stranded {
		plan.AppendStoppedAlloc(a, descEndpointMove)
	}
	return nil
}

// preferredNode returns the Ready node most of the replaced members ran on
// (ties: the lowest ID), or nil.
func preferredNode(reqs []placementRequest, nodes map[string]*structs.Node) *structs.Node {
	count := map[string]int{}
	var best *structs.Node
	for _, r := range reqs {
		if r.previous == nil {
			continue
		}
		n := nodes[r.previous.NodeID]
		if n == nil || !n.Ready() {
			continue
		}
		count[n.ID]++
		if best == nil || count[n.ID] > count[best.ID] || (count[n.ID] == count[best.ID] && n.ID < best.ID) {
			best = n
		}
	}
	return best
}

// placeEndpointHome places every request on home, where others members
// already run, or none of them, recording why in out.
func (c *evalCtx) placeEndpointHome(plan *structs.Plan, g *groupScan, home *structs.Node, running int, reqs []placementRequest, out *attempt) error {
	tg := reqs[0].tg
	g.metric.NodesEvaluated++
	fail := func(why string) {
		m := g.metric
		m.CoalescedFailures = len(reqs) - 1
		m.Explanation = fmt.Sprintf("endpoint %s: node %s, where its %d other members run, cannot take %d more: %s",
			tg.Endpoint.Name, home.Name, running, len(reqs), why)
		out.failed[tg.Name] = m
		out.queued[tg.Name] = len(reqs)
	}
	cand, reason := c.feasibility(c.job, g.ask, home)
	if cand == nil {
		g.metric.NodesFiltered++
		g.metric.ConstraintFiltered = map[string]int{reason: 1}
		fail(filterWords(reason))
		return nil
	}
	u, err := c.usage.get(home)
	if err != nil {
		return fmt.Errorf("read allocations of node %s: %w", home.ID, err)
	}
	placed, dim, err := c.tryEndpointNode(plan, g, cand, u, reqs)
	if err != nil {
		return err
	}
	if dim != "" {
		g.metric.NodesExhausted++
		g.metric.DimensionExhausted = map[string]int{dim: 1}
		why := dimensionWords(dim)
		if placed > 0 {
			why += fmt.Sprintf(" (room for %d of %d)", placed, len(reqs))
		}
		fail(why)
		if c.endpointAwaits(plan, g, cand, u, reqs) {
			noteAwaiting(out.failed[tg.Name], home, len(reqs))
		}
	}
	return nil
}

// endpointAwaits reports whether every request would fit on the
// candidate's node once the allocations being stopped there (told to stop
// or be evicted, or stopped by this plan) are gone, allocations evicted for
// a waiting job of higher priority excepted (see reservations). It changes
// neither plan nor u.
func (c *evalCtx) endpointAwaits(plan *structs.Plan, g *groupScan, cand *candidate, u *nodeUsage, reqs []placementRequest) bool {
	inPlan := map[string]bool{}
	for _, a := range plan.NodeUpdate[u.node.ID] {
		inPlan[a.ID] = true
	}
	f := u.clone()
	freed := false
	for _, a := range f.allocs {
		if a.DesiredStatus == structs.AllocDesiredStatusRun && !inPlan[a.ID] {
			continue
		}
		if reserved, err := c.usage.reserve.reservedFor(a); err != nil || reserved {
			continue
		}
		f.add(a.AllocatedResources, -1)
		if sh := a.AllocatedResources.Shared; sh != nil && sh.Endpoint != nil {
			f.ports.addEndpoint(structs.EndpointOwner(a), sh.Endpoint.Port, -1)
		}
		freed = true
	}
	if !freed {
		return false
	}
	f.recount()
	n, dim, err := c.tryEndpointNode(&structs.Plan{}, g, cand, f, reqs)
	return err == nil && dim == "" && n == len(reqs)
}

// noteAwaiting records on m that all n members fit on node once the
// allocations being stopped there are gone: the blocked evaluation places
// them then, and `job run` waits for it instead of reporting a failure.
func noteAwaiting(m *structs.AllocMetric, node *structs.Node, n int) {
	m.AwaitingStops = n
	m.Explanation += fmt.Sprintf("; all %d fit on node %s once allocations being stopped release their resources", n, node.Name)
}

// placeEndpointSet places every request on one node, or none, recording
// why in out; it reports whether they were placed. Every node is checked
// (an endpoint group is small, and a node that fits one member may not fit
// them all); the candidates are tried best first (score, then node ID),
// preferred first when it fits.
func (c *evalCtx) placeEndpointSet(plan *structs.Plan, g *groupScan, reqs []placementRequest, preferred *structs.Node, out *attempt) (bool, error) {
	tg := reqs[0].tg
	for g.cursor < len(g.order) {
		if err := g.visit(); err != nil {
			return false, err
		}
	}
	order := make([]int, 0, len(g.cands))
	for i := range g.cands {
		order = append(order, i)
	}
	sort.SliceStable(order, func(x, y int) bool {
		i, j := order[x], order[y]
		if preferred != nil && (g.cands[i].node.ID == preferred.ID) != (g.cands[j].node.ID == preferred.ID) {
			return g.cands[i].node.ID == preferred.ID
		}
		if g.scores[i] != g.scores[j] {
			return g.scores[i] > g.scores[j]
		}
		return g.cands[i].node.ID < g.cands[j].node.ID
	})
	m := g.metric
	var partial []string
	exhaust := func(dim string) {
		m.NodesExhausted++
		if m.DimensionExhausted == nil {
			m.DimensionExhausted = map[string]int{}
		}
		m.DimensionExhausted[dim]++
	}
	for _, i := range order {
		if g.dims[i] != "" {
			exhaust(g.dims[i])
			continue
		}
		placed, dim, err := c.tryEndpointNode(plan, g, g.cands[i], g.usages[i], reqs)
		if err != nil {
			return false, err
		}
		if dim == "" {
			return true, nil
		}
		exhaust(dim)
		if placed > 0 && len(partial) < maxPartialNotes {
			partial = append(partial, fmt.Sprintf("node %s has room for %d (%s)", g.cands[i].node.Name, placed, dimensionWords(dim)))
		}
	}
	m.CoalescedFailures = len(reqs) - 1
	m.Explanation = fmt.Sprintf("endpoint %s: no node fits all %d members: %s", tg.Endpoint.Name, len(reqs), m.Explain())
	if len(partial) > 0 {
		m.Explanation += "; " + strings.Join(partial, "; ")
	}
	out.failed[tg.Name] = m
	out.queued[tg.Name] = len(reqs)
	for _, i := range order {
		if c.endpointAwaits(plan, g, g.cands[i], g.usages[i], reqs) {
			noteAwaiting(m, g.cands[i].node, len(reqs))
			break
		}
	}
	return false, nil
}

// tryEndpointNode places every request on the candidate's node, each
// holding the endpoint's port, and returns an empty dim. When one does not
// fit it takes the ones placed so far out of the plan again and returns
// how many fitted and the exhausted dimension.
func (c *evalCtx) tryEndpointNode(plan *structs.Plan, g *groupScan, cand *candidate, u *nodeUsage, reqs []placementRequest) (int, string, error) {
	tg := reqs[0].tg
	ep := tg.Endpoint
	owner := c.endpointOwner(tg)
	if dim := u.ports.endpointFits(owner, ep.Port); dim != "" {
		return 0, dim, nil
	}
	var placed []*structs.Allocation
	undo := func() {
		usages := make([]*nodeUsage, len(placed))
		for i := range placed {
			usages[i] = u
			u.ports.addEndpoint(owner, ep.Port, -1)
		}
		rollback(plan, placed, usages)
	}
	for _, req := range reqs {
		// The router port is taken first, so no member's dynamic port
		// can be given it.
		u.ports.addEndpoint(owner, ep.Port, 1)
		if _, dim := fit(g.ask, cand, u, &g.sc); dim != "" {
			u.ports.addEndpoint(owner, ep.Port, -1)
			n := len(placed)
			undo()
			return n, dim, nil
		}
		ar, err := assign(g.ask, cand, u, &g.sc)
		if err != nil {
			u.ports.addEndpoint(owner, ep.Port, -1)
			undo()
			return 0, "", err
		}
		name := structs.AllocName(c.job.ID, tg.Name, req.index)
		ip := cand.node.HostIP()
		sh, err := u.ports.pick(g.ask.ports, ip, c.eval.ID+"/"+name)
		if err != nil {
			u.release(ar)
			u.ports.addEndpoint(owner, ep.Port, -1)
			undo()
			return 0, "", err
		}
		if sh == nil {
			sh = &structs.AllocatedSharedResources{}
		}
		sh.Endpoint = &structs.AllocatedEndpoint{Name: ep.Name, Port: ep.Port, HostIP: ip}
		ar.Shared = sh
		a := c.newAlloc(tg, req, cand.node, ar)
		plan.AppendAlloc(a)
		placed = append(placed, a)
	}
	return len(placed), "", nil
}

// newAlloc returns the allocation placing req on node with resources ar.
func (c *evalCtx) newAlloc(tg *structs.TaskGroup, req placementRequest, node *structs.Node, ar *structs.AllocatedResources) *structs.Allocation {
	a := &structs.Allocation{
		ID:                 structs.GenerateUUID(),
		Namespace:          c.job.Namespace,
		EvalID:             c.eval.ID,
		Name:               structs.AllocName(c.job.ID, tg.Name, req.index),
		NodeID:             node.ID,
		NodeName:           node.Name,
		JobID:              c.job.ID,
		Job:                c.job,
		TaskGroup:          tg.Name,
		AllocatedResources: ar,
		DesiredStatus:      structs.AllocDesiredStatusRun,
		ClientStatus:       structs.AllocClientStatusPending,
	}
	if req.previous != nil {
		a.PreviousAllocation = req.previous.ID
	}
	if req.deploymentID != "" {
		a.DeploymentID = req.deploymentID
		if req.canary {
			a.DeploymentStatus = &structs.AllocDeploymentStatus{Canary: true}
		}
	}
	return a
}

// filterWords and dimensionWords word one node's reason as
// AllocMetric.Explain does.
func filterWords(reason string) string {
	m := &structs.AllocMetric{ConstraintFiltered: map[string]int{reason: 1}}
	return strings.TrimPrefix(m.Explain(), "1 node: ")
}

func dimensionWords(dim string) string {
	m := &structs.AllocMetric{DimensionExhausted: map[string]int{dim: 1}}
	return strings.TrimPrefix(m.Explain(), "1 node: ")
}

// promotedReason returns the reason an opportunistic node is refused for
// group tg of job: its endpoint carries a promoted alias ("endpoint
// llm-70b is promoted (alias llm.primary): opportunistic nodes
// excluded"), or "" when the group has no endpoint or no alias is
// promoted onto it. When the aliases cannot be read the group is treated
// as promoted (fail closed): a promoted endpoint must never land on an
// opportunistic node.
func promotedReason(st State, job *structs.Job, tg *structs.TaskGroup) string {
	if tg == nil || tg.Endpoint == nil || tg.Endpoint.Name == "" {
		return ""
	}
	aliases, err := st.EndpointAliasesByEndpoint(job.Namespace, tg.Endpoint.Name)
	if err != nil {
		return fmt.Sprintf("endpoint %s promotion unknown (%v): opportunistic nodes excluded", tg.Endpoint.Name, err)
	}
	if len(aliases) == 0 {
		return ""
	}
	return fmt.Sprintf("endpoint %s is promoted (alias %s): opportunistic nodes excluded", tg.Endpoint.Name, aliases[0].Name)
}
