package provision

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// idleMark is since when a node has been idle by its pool's rule (Unix
// nanoseconds; 0: not idle), and since when its GPUs were below the
// rule's utilisation.
type idleMark struct {
	since    int64
	gpuSince int64
}

// nodeWork describes what runs on a node.
type nodeWork struct {
	running int // allocations that hold resources and should run
	batch   int // of which batch
}

func workOn(st *state.StateStore, nodeID string) (nodeWork, error) {
	allocs, err := st.AllocsByNode(nil, nodeID)
	if err != nil {
		return nodeWork{}, err
	}
	var w nodeWork
	for _, a := range allocs {
		if a.ClientTerminalStatus() {
			continue
		}
		if a.DesiredStatus != structs.AllocDesiredStatusRun && a.ClientStatus != structs.AllocClientStatusRunning {
			continue
		}
		w.running++
		if a.Job != nil && a.Job.Type == structs.JobTypeBatch {
			w.batch++
		}
	}
	return w, nil
}

// idleNow reports whether node is idle by rule at now, updating its mark:
// no allocation (always none of batch; none at all when NoAllocations or
// no GPU rule is set), and, when GPUUtilBelowPercent is set, every GPU
// below it for GPUUtilFor by the client's device stats. A node without
// stats does not satisfy a GPU rule.
func (p *Provisioner) idleNow(ctx context.Context, st *state.StateStore, node *structs.Node, rule structs.PoolIdleRule, now time.Time) (bool, error) {
	w, err := workOn(st, node.ID)
	if err != nil {
		return false, err
	}
	idle := w.batch == 0
	gpuRule := rule.GPUUtilBelowPercent > 0
	if rule.NoAllocations || !gpuRule {
		idle = idle && w.running == 0
	}
	m := p.idleMark(node.ID)
	if idle && gpuRule {
		low := false
		if p.cfg.DeviceStats != nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			stats, err := p.cfg.DeviceStats(sctx, node)
			cancel()
			low = err == nil && gpusBelow(stats, rule.GPUUtilBelowPercent)
		}
		if !low {
			m.gpuSince = 0
		} else if m.gpuSince == 0 {
			m.gpuSince = now.UnixNano()
		}
		idle = low && now.UnixNano()-m.gpuSince >= int64(rule.GPUUtilFor)
	}
	if !idle {
		m.since = 0
	} else if m.since == 0 {
		m.since = now.UnixNano()
	}
	p.setIdleMark(node.ID, m)
	return idle, nil
}

// gpusBelow reports whether stats has at least one GPU and every GPU's
// utilisation is below pct.
func gpusBelow(stats *structs.NodeDeviceStats, pct int) bool {
	if stats == nil {
		return false
	}
	n := 0
	for _, d := range stats.Devices {
		if d == nil || d.Type != "gpu" {
			continue
		}
		if d.Error != "" || d.UtilizationPercent >= float64(pct) {
			return false
		}
		n++
	}
	return n > 0
}

func (p *Provisioner) idleMark(nodeID string) idleMark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle[nodeID]
}

func (p *Provisioner) setIdleMark(nodeID string, m idleMark) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle[nodeID] = m
}

// scaleIn removes idle hosts of the pool, never below Min: a host whose
// node has been idle by the pool's rule for IdleAfter is drained first
// (services move, batch allocations finish or the node stays), and its
// terminate is recorded only once the drain is over and nothing runs on
// the node. A node running a batch allocation is never terminated.
// Another pool's drain never waits on this one: Drain only records the
// drain; the leader's drainer advances it.
func (p *Provisioner) scaleIn(ctx context.Context, st *state.StateStore, v *poolView, nodes map[string]*structs.Node, now time.Time) error {
	sp := v.pool.Scaling
	if p.cfg.Drain == nil || sp == nil {
		return nil
	}
	remaining := len(v.live) + len(v.pending)
	for _, r := range v.live {
		if _, ok := v.terminating[r.HostID]; ok {
			remaining--
		}
	}
	type candidate struct {
		r    *structs.ProvisionRequest
		node *structs.Node
		m    idleMark
	}
	var cands []candidate
	for _, r := range v.live {
		if _, ok := v.terminating[r.HostID]; ok {
			continue
		}
		n := nodes[r.NodeName]
		if n == nil || n.Status != structs.NodeStatusReady {
			continue
		}
		idle, err := p.idleNow(ctx, st, n, sp.Idle, now)
		if err != nil {
			return err
		}
		if !idle {
			continue
		}
		m := p.idleMark(n.ID)
		if now.UnixNano()-m.since < int64(sp.IdleAfter) {
			continue
		}
		cands = append(cands, candidate{r: r, node: n, m: m})
	}
	// Nodes already leaving (draining or drained) first, then the longest
	// idle.
	leaving := func(n *structs.Node) bool {
		return n.DrainStrategy != nil || n.SchedulingEligibility == structs.NodeSchedulingIneligible
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if li, lj := leaving(cands[i].node), leaving(cands[j].node); li != lj {
			return li
		}
		return cands[i].m.since < cands[j].m.since
	})
	for _, c := range cands {
		if remaining <= sp.Min {
			return nil
		}
		n := c.node
		switch {
		case n.DrainStrategy != nil:
			remaining-- // draining: the drainer finishes it
			continue
		case n.SchedulingEligibility != structs.NodeSchedulingIneligible:
			if err := p.cfg.Drain(ctx, n.ID); err != nil {
				return fmt.Errorf("drain node %s: %w", n.ID, err)
			}
			p.logger.Info("scale-in: draining idle node", "pool", v.pool.Name, "node_id", n.ID, "node", n.Name)
			remaining--
			continue
		}
		// Drained and ineligible: terminate only with nothing running.
		w, err := workOn(st, n.ID)
		if err != nil {
			return err
		}
		remaining--
		if w.running > 0 || w.batch > 0 {
			continue
		}
		idleFor := time.Duration(now.UnixNano() - c.m.since).Round(time.Second)
		reason := fmt.Sprintf("node %s idle for %s (%s): -1", n.Name, idleFor, ruleString(sp.Idle))
		if err := p.recordTerminate(v.pool.Name, c.r.HostID, n.Name, "", reason, now); err != nil {
			return err
		}
	}
	return nil
}

func ruleString(r structs.PoolIdleRule) string {
	if r.GPUUtilBelowPercent > 0 {
		s := fmt.Sprintf("GPUs below %d%% for %s", r.GPUUtilBelowPercent, r.GPUUtilFor)
		if r.NoAllocations {
			s = "no allocations, " + s
		}
		return s
	}
	return "no allocations"
}
