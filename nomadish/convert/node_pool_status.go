package convert

import (
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// NodePoolStatusFromStructs renders a pool's provisioning status.
func NodePoolStatusFromStructs(s *structs.NodePoolStatus) *api.NodePoolStatus {
	if s == nil {
		return nil
	}
	out := &api.NodePoolStatus{Pool: NodePoolFromStructs(s.Pool), Hosts: s.Hosts,
		Nodes: []*api.NodePoolStatusNode{}, Pending: []*api.ProvisionRequest{}, Decisions: []*api.NodePoolDecision{}, Failed: []*api.ProvisionRequest{}}
	for _, n := range s.Nodes {
		out.Nodes = append(out.Nodes, &api.NodePoolStatusNode{Name: n.Name, NodeID: n.NodeID, HostID: n.HostID, State: n.State, Allocs: n.Allocs})
	}
	for _, r := range s.Pending {
		out.Pending = append(out.Pending, ProvisionRequestFromStructs(r))
	}
	for _, d := range s.Decisions {
		out.Decisions = append(out.Decisions, &api.NodePoolDecision{Index: d.Index, Time: unixNanoTime(d.Time), Op: d.Op, Count: d.Count, Reason: d.Reason})
	}
	for _, r := range s.Failed {
		out.Failed = append(out.Failed, ProvisionRequestFromStructs(r))
	}
	for _, w := range s.Waiting {
		out.Waiting = append(out.Waiting, w.Reason)
	}
	return out
}

// ProvisionRequestFromStructs renders one provision request.
func ProvisionRequestFromStructs(r *structs.ProvisionRequest) *api.ProvisionRequest {
	if r == nil {
		return nil
	}
	return &api.ProvisionRequest{ID: r.ID, Pool: r.Pool, Op: r.Op, Status: r.Status, HostID: r.HostID, NodeName: r.NodeName,
		GroupKey: r.GroupKey, Reason: r.Reason, Error: r.Error, Attempts: r.Attempts, NextAttempt: unixNanoTime(r.NextAttempt),
		CreateTime: unixNanoTime(r.CreateTime), ModifyTime: unixNanoTime(r.ModifyTime), CreateIndex: r.CreateIndex, ModifyIndex: r.ModifyIndex}
}

// unixNanoTime is t (Unix nanoseconds) in UTC; zero stays the zero time.
func unixNanoTime(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t).UTC()
}
