package scheduler

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
)

// evalCtx holds what one evaluation attempt shares across its groups: the
// nodes in ID order, the node usage index and compiled patterns.
type evalCtx struct {
	eval  *structs.Evaluation
	job   *structs.Job
	nodes []*structs.Node
	rx    regexpCache
	usage *usageIndex
	// allocs are the job's allocations in the state (endpoint groups
	// find their home node among them; see endpoint.go).
	allocs []*structs.Allocation
	// choices and choiceLists are arenas for candidate.choices, so a
	// feasibility scan does not allocate per node.
	choices     []devChoice
	choiceLists [][]devChoice
}

// candidateLimit and visitLimit bound how many nodes one placement looks
// at. Placement visits nodes until candidateLimit of the visited ones fit,
// or visitLimit nodes were visited and at least one fits, or every node was
// visited; it then picks the best visited node that fits. Nomad's
// GenericStack (scheduler/stack.go) stops at 2 fitting nodes for batch jobs
// and log2(nodes) for service jobs, relying on the power of two choices;
// GPUlayer looks at more because a GPU placed on an idle node fragments it
// for larger jobs. On a cluster with at most candidateLimit feasible nodes
// placement is exact best-fit. The visit limit keeps a nearly full cluster
// from being read in full for every placement.
const (
	candidateLimit = 32
	visitLimit     = 4 * candidateLimit
)

// place appends an allocation to plan for every request it can place,
// group by group, and records the groups it could not place in full in
// out.failed and out.queued.
//
// Nodes are visited in a pseudo-random order seeded by the evaluation ID
// and group name, so the same snapshot and evaluation give the same plan.
// Each visited node is checked for feasibility once per group, its usage
// is read from the state once per evaluation (and shared by all groups),
// and it is scored once; after each placement only the chosen node is
// scored again, since only its usage changed. Before each placement more
// nodes are visited (see candidateLimit); a placement fails only after
// every node was checked, so the failure metric covers the whole cluster. Once one
// allocation of a group fails, the rest of the group would fail for the
// same reasons: they are counted in CoalescedFailures without being tried.
func (c *evalCtx) place(plan *structs.Plan, reqs []placementRequest, out *attempt) error {
	for start := 0; start < len(reqs); {
		end := start + 1
		for end < len(reqs) && reqs[end].tg == reqs[start].tg {
			end++
		}
		place := c.placeGroup
		if reqs[start].tg.Endpoint != nil {
			place = c.placeEndpointGroup
		}
		if err := place(plan, reqs[start:end], out); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// groupScan is the state of placing one task group: the nodes visited so
// far and, for each feasible one, its usage, score and exhausted dimension
// ("" when an allocation fits).
type groupScan struct {
	ctx     *evalCtx
	ask     *groupAsk
	metric  *structs.AllocMetric
	order   []*structs.Node
	rng     *rand.Rand
	cursor  int
	cands   []*candidate
	usages  []*nodeUsage
	scores  []float64
	dims    []string
	fitting int
	sc      devScratch
}

func (c *evalCtx) newGroupScan(tg *structs.TaskGroup) *groupScan {
	h := fnv.New64a()
	h.Write([]byte(c.eval.ID))
	h.Write([]byte{0})
	h.Write([]byte(tg.Name))
	seed := h.Sum64()
	ask := newGroupAsk(c.job, tg)
	ask.promoted = promotedReason(c.usage.state, c.job, tg)
	return &groupScan{
		ctx:    c,
		ask:    ask,
		metric: &structs.AllocMetric{},
		order:  slices.Clone(c.nodes),
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// visit checks the next node in the shuffled order (an incremental
// Fisher-Yates shuffle) and adds it to the candidates when it is feasible.
func (g *groupScan) visit() error {
	j := g.cursor + g.rng.IntN(len(g.order)-g.cursor)
	g.order[g.cursor], g.order[j] = g.order[j], g.order[g.cursor]
	n := g.order[g.cursor]
	g.cursor++
	g.metric.NodesEvaluated++
	cand, reason := g.ctx.feasibility(g.ctx.job, g.ask, n)
	if cand == nil {
		g.metric.NodesFiltered++
		if g.metric.ConstraintFiltered == nil {
			g.metric.ConstraintFiltered = map[string]int{}
		}
		g.metric.ConstraintFiltered[reason]++
		return nil
	}
	u, err := g.ctx.usage.get(n)
	if err != nil {
		return fmt.Errorf("read allocations of node %s: %w", n.ID, err)
	}
	score, dim := fit(g.ask, cand, u, &g.sc)
	g.cands = append(g.cands, cand)
	g.usages = append(g.usages, u)
	g.scores = append(g.scores, score)
	g.dims = append(g.dims, dim)
	if dim == "" {
		g.fitting++
	}
	return nil
}

// best returns the index of the highest-scoring candidate that fits, ties
// going to the lowest node ID, or -1.
func (g *groupScan) best() int {
	best := -1
	for i, d := range g.dims {
		if d != "" {
			continue
		}
		if best < 0 || g.scores[i] > g.scores[best] ||
			(g.scores[i] == g.scores[best] && g.cands[i].node.ID < g.cands[best].node.ID) {
			best = i
		}
	}
	return best
}

// placeGroup places reqs, which all belong to one task group. A gang group
// (structs.TaskGroup.Gang) is placed whole or not at all: when one member
// does not fit, the members placed so far are taken out of the plan again.
// Requests that do not fit may preempt lower-priority work (see preempt).
func (c *evalCtx) placeGroup(plan *structs.Plan, reqs []placementRequest, out *attempt) error {
	tg := reqs[0].tg
	g := c.newGroupScan(tg)
	var placed []*structs.Allocation
	var placedOn []*nodeUsage
	for k, req := range reqs {
		for g.fitting < candidateLimit && g.cursor < len(g.order) && (g.fitting == 0 || len(g.cands) < visitLimit) {
			if err := g.visit(); err != nil {
				return err
			}
		}
		best := g.best()
		if best < 0 {
			m := g.metric.Copy()
			for _, d := range g.dims {
				m.NodesExhausted++
				if m.DimensionExhausted == nil {
					m.DimensionExhausted = map[string]int{}
				}
				m.DimensionExhausted[d]++
			}
			left := len(reqs) - k
			if tg.Gang {
				rollback(plan, placed, placedOn)
				left = len(reqs)
			}
			m.CoalescedFailures = left - 1
			m.Explanation = m.Explain()
			if note := failureNote(req); note != "" {
				m.Explanation += "; " + note
			}
			if claimed, evicted := c.preempt(plan, g, left, out); claimed > 0 {
				m.AwaitingStops = claimed
				m.Explanation += fmt.Sprintf("; %d of %d will fit once allocations being stopped release their resources", claimed, left)
				if evicted > 0 {
					m.Explanation += fmt.Sprintf(" (%d preempted now)", evicted)
				}
			}
			out.failed[tg.Name] = m
			out.queued[tg.Name] = left
			return nil
		}
		cand, u := g.cands[best], g.usages[best]
		ar, err := assign(g.ask, cand, u, &g.sc)
		if err != nil {
			return err
		}
		name := structs.AllocName(c.job.ID, tg.Name, req.index)
		if ar.Shared, err = u.ports.pick(g.ask.ports, cand.node.HostIP(), c.eval.ID+"/"+name); err != nil {
			return err
		}
		a := &structs.Allocation{
			ID:                 structs.GenerateUUID(),
			Namespace:          c.job.Namespace,
			EvalID:             c.eval.ID,
			Name:               name,
			NodeID:             cand.node.ID,
			NodeName:           cand.node.Name,
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
		plan.AppendAlloc(a)
		placed = append(placed, a)
		placedOn = append(placedOn, u)
		g.scores[best], g.dims[best] = fit(g.ask, cand, u, &g.sc)
		if g.dims[best] != "" {
			g.fitting--
		}
	}
	if tg.Gang {
		nodes := make([]*structs.Node, len(placedOn))
		for i, u := range placedOn {
			nodes[i] = u.node
		}
		setGangInfo(c.job, tg, placed, nodes, reqs[0].gangAttempt, reqs[0].gangRestarts)
	}
	return nil
}
