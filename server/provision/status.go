package provision

import (
	"sort"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// Node states in a PoolStatus.
const (
	PoolNodeIdle     = "idle"     // ready, nothing running
	PoolNodeBusy     = "busy"     // runs allocations
	PoolNodeDraining = "draining" // draining or drained (ineligible)
	PoolNodeDown     = "down"     // not ready
	PoolNodeJoining  = "joining"  // the host exists, its node has not registered
)

// MaxPoolDecisions bounds the decisions a PoolStatus lists.
const MaxPoolDecisions = 20

// PoolStatus is what `node pool status` shows of one pool: its nodes,
// pending requests, last decisions and failed provider calls.
type PoolStatus struct {
	Pool *structs.NodePool
	// Hosts counts the pool's provisioned hosts (live creates).
	Hosts     int
	Nodes     []PoolNode
	Pending   []*structs.ProvisionRequest
	Decisions []PoolDecision
	// Failed are requests whose last provider call failed (retrying) or
	// that gave up, newest first.
	Failed []*structs.ProvisionRequest
}

// PoolNode is one node (or joining host) of a pool.
type PoolNode struct {
	Name   string
	NodeID string `json:",omitempty"`
	HostID string `json:",omitempty"`
	State  string
	Allocs int
}

// PoolDecision is one recorded decision: the requests of one Raft entry.
type PoolDecision struct {
	Index  uint64
	Time   int64 // Unix nanoseconds
	Op     string
	Count  int
	Reason string
}

// BuildPoolStatus reads the pool's status from st.
func BuildPoolStatus(st *state.StateStore, pool *structs.NodePool) (*PoolStatus, error) {
	reqs, err := st.ProvisionRequestsByPool(nil, pool.Name)
	if err != nil {
		return nil, err
	}
	nodes, err := poolNodes(st, pool.Name)
	if err != nil {
		return nil, err
	}
	v := newPoolView(pool, reqs)
	out := &PoolStatus{Pool: pool, Hosts: len(v.live)}
	hostOf := map[string]string{}
	for _, r := range v.live {
		hostOf[r.NodeName] = r.HostID
		if nodes[r.NodeName] == nil {
			out.Nodes = append(out.Nodes, PoolNode{Name: r.NodeName, HostID: r.HostID, State: PoolNodeJoining})
		}
	}
	for name, n := range nodes {
		w, err := workOn(st, n.ID)
		if err != nil {
			return nil, err
		}
		pn := PoolNode{Name: name, NodeID: n.ID, HostID: hostOf[name], Allocs: w.running}
		switch {
		case n.Status != structs.NodeStatusReady:
			pn.State = PoolNodeDown
		case n.DrainStrategy != nil || n.SchedulingEligibility == structs.NodeSchedulingIneligible:
			pn.State = PoolNodeDraining
		case w.running > 0:
			pn.State = PoolNodeBusy
		default:
			pn.State = PoolNodeIdle
		}
		out.Nodes = append(out.Nodes, pn)
	}
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	byIndex := map[uint64]*PoolDecision{}
	for _, r := range reqs {
		if !r.Finished() {
			out.Pending = append(out.Pending, r)
		}
		if r.Error != "" {
			out.Failed = append(out.Failed, r)
		}
		d := byIndex[r.CreateIndex]
		if d == nil {
			d = &PoolDecision{Index: r.CreateIndex, Time: r.CreateTime, Op: r.Op, Reason: r.Reason}
			byIndex[r.CreateIndex] = d
		}
		d.Count++
	}
	for _, d := range byIndex {
		out.Decisions = append(out.Decisions, *d)
	}
	sort.Slice(out.Decisions, func(i, j int) bool { return out.Decisions[i].Index > out.Decisions[j].Index })
	if len(out.Decisions) > MaxPoolDecisions {
		out.Decisions = out.Decisions[:MaxPoolDecisions]
	}
	sort.Slice(out.Failed, func(i, j int) bool { return out.Failed[i].ModifyIndex > out.Failed[j].ModifyIndex })
	if len(out.Failed) > MaxPoolDecisions {
		out.Failed = out.Failed[:MaxPoolDecisions]
	}
	return out, nil
}
