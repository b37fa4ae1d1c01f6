package scheduler

import (
	"fmt"

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
}

// place appends an allocation to plan for every request it can place,
// group by group, and records the groups it could not place in full in
// out.failed and out.queued.
//
// For each group it checks every node's feasibility once, reads the usage
// of feasible nodes once (shared by all groups of the evaluation), and
// scores every feasible node once. After each placement only the chosen
// node is scored again, since only its usage changed, so placing k
// allocations of a group on n nodes costs O(n·k) comparisons but only
// O(n + k) score computations. Once one allocation of a group fails, the
// rest of the group would fail for the same reasons: they are counted in
// CoalescedFailures without being tried.
func (c *evalCtx) place(plan *structs.Plan, reqs []placementRequest, out *attempt) error {
	for start := 0; start < len(reqs); {
		end := start + 1
		for end < len(reqs) && reqs[end].tg == reqs[start].tg {
			end++
		}
		if err := c.placeGroup(plan, reqs[start:end], out); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// placeGroup places reqs, which all belong to one task group.
func (c *evalCtx) placeGroup(plan *structs.Plan, reqs []placementRequest, out *attempt) error {
	tg := reqs[0].tg
	ask := newGroupAsk(c.job, tg)
	metric := &structs.AllocMetric{}
	var cands []*candidate
	var usages []*nodeUsage
	maxGroups := 0
	for _, n := range c.nodes {
		metric.NodesEvaluated++
		cand, reason := c.feasibility(c.job, ask, n)
		if cand == nil {
			metric.NodesFiltered++
			if metric.ConstraintFiltered == nil {
				metric.ConstraintFiltered = map[string]int{}
			}
			metric.ConstraintFiltered[reason]++
			continue
		}
		u, err := c.usage.get(n)
		if err != nil {
			return fmt.Errorf("read allocations of node %s: %w", n.ID, err)
		}
		cands = append(cands, cand)
		usages = append(usages, u)
		maxGroups = max(maxGroups, len(u.free))
	}
	taken := make([]int, maxGroups)
	scores := make([]float64, len(cands))
	dims := make([]string, len(cands))
	for i := range cands {
		scores[i], dims[i] = fit(ask, cands[i], usages[i], taken[:len(usages[i].free)])
	}
	for k, req := range reqs {
		best := -1
		for i := range cands {
			// cands are in node ID order, so a strict comparison keeps the
			// lowest node ID among equal scores.
			if dims[i] == "" && (best < 0 || scores[i] > scores[best]) {
				best = i
			}
		}
		if best < 0 {
			m := metric.Copy()
			for _, d := range dims {
				m.NodesExhausted++
				if m.DimensionExhausted == nil {
					m.DimensionExhausted = map[string]int{}
				}
				m.DimensionExhausted[d]++
			}
			m.CoalescedFailures = len(reqs) - k - 1
			out.failed[tg.Name] = m
			out.queued[tg.Name] = len(reqs) - k
			return nil
		}
		cand, u := cands[best], usages[best]
		ar := assign(ask, cand, u, taken[:len(u.free)])
		a := &structs.Allocation{
			ID:                 structs.GenerateUUID(),
			Namespace:          c.job.Namespace,
			EvalID:             c.eval.ID,
			Name:               structs.AllocName(c.job.ID, tg.Name, req.index),
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
		plan.AppendAlloc(a)
		scores[best], dims[best] = fit(ask, cand, u, taken[:len(u.free)])
	}
	return nil
}
