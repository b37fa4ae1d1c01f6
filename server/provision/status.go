package provision

import (
	"sort"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// BuildPoolStatus reads the pool's status from st.
func BuildPoolStatus(st *state.StateStore, pool *structs.NodePool) (*structs.NodePoolStatus, error) {
	reqs, err := st.ProvisionRequestsByPool(nil, pool.Name)
	if err != nil {
		return nil, err
	}
	nodes, err := poolNodes(st, pool.Name)
	if err != nil {
		return nil, err
	}
	v := newPoolView(pool, reqs)
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
