package provision

import (
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// BuildPoolStatus reads the pool's status from st.
func BuildPoolStatus(st *state.StateStore, pool *structs.NodePool) (*structs.NodePoolStatus, error) {
	reqs, v, nodes, err := readPool(st, pool)
	if err != nil {
		return nil, err
	}
	out := &structs.NodePoolStatus{Pool: pool, Hosts: len(v.live)}
	hostOf := map[string]string{}
	for _, r := range v.live {
		hostOf[r.NodeName] = r.HostID
		if nodes[r.NodeName] == nil {
			out.Nodes = append(out.Nodes, structs.NodePoolStatusNode{Name: r.NodeName, HostID: r.HostID, State: structs.PoolNodeJoining})
		}
	}
	for name, n := range nodes {
		w, err := workOn(st, n.ID)
		if err != nil {
			return nil, err
		}
		pn := structs.NodePoolStatusNode{Name: name, NodeID: n.ID, HostID: hostOf[name], Allocs: w.running}
		switch {
		case n.Status != structs.NodeStatusReady:
			pn.State = structs.PoolNodeDown
		case n.DrainStrategy != nil || n.SchedulingEligibility == structs.NodeSchedulingIneligible:
			pn.State = structs.PoolNodeDraining
		case w.running > 0:
			pn.State = structs.PoolNodeBusy
		default:
			pn.State = structs.PoolNodeIdle
		}
		out.Nodes = append(out.Nodes, pn)
	}
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	byIndex := map[uint64]*structs.NodePoolDecision{}
	for _, r := range reqs {
		if !r.Finished() {
			out.Pending = append(out.Pending, r)
		}
		if r.Error != "" {
			out.Failed = append(out.Failed, r)
		}
		d := byIndex[r.CreateIndex]
		if d == nil {
			d = &structs.NodePoolDecision{Index: r.CreateIndex, Time: r.CreateTime, Op: r.Op, Reason: r.Reason}
			byIndex[r.CreateIndex] = d
		}
		d.Count++
	}
	for _, d := range byIndex {
		out.Decisions = append(out.Decisions, *d)
	}
	sort.Slice(out.Decisions, func(i, j int) bool { return out.Decisions[i].Index > out.Decisions[j].Index })
	if len(out.Decisions) > structs.MaxPoolDecisions {
		out.Decisions = out.Decisions[:structs.MaxPoolDecisions]
	}
	sort.Slice(out.Failed, func(i, j int) bool { return out.Failed[i].ModifyIndex > out.Failed[j].ModifyIndex })
	if len(out.Failed) > structs.MaxPoolDecisions {
		out.Failed = out.Failed[:structs.MaxPoolDecisions]
	}
	return out, nil
}

// PoolWaiting says why blocked work of pool gets no new hosts now, one
// line each (at most structs.MaxProvisionReasonLen bytes), at most
// structs.MaxPoolDecisions: task groups the pool's
// shape cannot place (more GPUs an allocation than a host has, another GPU
// model or node class), gangs larger than the room Max leaves, and demand
// beyond Max. A line naming a job carries the job's namespace, for the
// reader to hide from who may not list it. It reads what the provisioner's round reads (every
// evaluation, the blocked ones' jobs, the pools, the pool's requests and
// nodes) and decides nothing. A pool without a scaling policy waits for
// nothing (nil).
func PoolWaiting(st *state.StateStore, pool *structs.NodePool) ([]structs.PoolWait, error) {
	if pool == nil || pool.Scaling == nil {
		return nil, nil
	}
	evals, err := st.Evals(nil)
	if err != nil {
		return nil, err
	}
	blocked := blockedInOrder(evals)
	jobs := map[string]*structs.Job{}
	for _, e := range blocked {
		key := e.Namespace + "/" + e.JobID
		if _, ok := jobs[key]; ok {
			continue
		}
		j, err := st.JobByID(nil, e.JobID)
		if err != nil {
			return nil, err
		}
		jobs[key] = j
	}
	pools, err := st.NodePools(nil)
	if err != nil {
		return nil, err
	}
	_, v, nodes, err := readPool(st, pool)
	if err != nil {
		return nil, err
	}
	notReady, err := hostsComing(st, v, nodes)
	if err != nil {
		return nil, err
	}
	needs, byKey, unserved := blockedDemand(pool, blocked, jobs, anyPoolOwners(pools, blocked, jobs))
	_, held := planScaleUp(v, needs, byKey, notReady)
	out := unserved
	for _, h := range held {
		out = append(out, structs.PoolWait{Reason: h})
	}
	if len(out) > structs.MaxPoolDecisions {
		out = out[:structs.MaxPoolDecisions]
	}
	// A reason quotes the need's key, whose device name only the request
	// body bounds: each line is cut as a decision's Reason is.
	for i := range out {
		out[i].Reason = strings.ToValidUTF8(truncate(out[i].Reason, structs.MaxProvisionReasonLen), "")
	}
	return out, nil
}

// readPool reads the pool's provision requests, sorted into a poolView,
// and its nodes by name.
func readPool(st *state.StateStore, pool *structs.NodePool) ([]*structs.ProvisionRequest, *poolView, map[string]*structs.Node, error) {
	reqs, err := st.ProvisionRequestsByPool(nil, pool.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	nodes, err := poolNodes(st, pool.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	return reqs, newPoolView(pool, reqs), nodes, nil
}
