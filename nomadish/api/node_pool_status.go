package api

import (
	"net/url"
	"time"
)

// NodePoolStatus is the body of GET /v1/node/pool/{name}/status
// (GPUlayer's; Nomad has no provisioning): the pool, its nodes, pending
// provision requests, the last scaling decisions and failed provider
// calls.
type NodePoolStatus struct {
	Pool *NodePool
	// Hosts counts the pool's provisioned hosts.
	Hosts     int
	Nodes     []*NodePoolStatusNode
	Pending   []*ProvisionRequest
	Decisions []*NodePoolDecision
	// Failed are requests whose last provider call failed (retrying) or
	// that gave up, newest first.
	Failed []*ProvisionRequest
	// Waiting says why blocked work of the pool gets no new hosts, one
	// line each (a group no host of the pool can place, a gang larger
	// than max leaves room for, demand beyond max).
	Waiting []string `json:",omitempty"`
}

// NodePoolStatusNode is one node (or a host whose node has not joined).
type NodePoolStatusNode struct {
	Name   string
	NodeID string `json:",omitempty"`
	HostID string `json:",omitempty"`
	// State is idle, busy, draining, down or joining.
	State  string
	Allocs int
}

// NodePoolDecision is one recorded scaling decision.
type NodePoolDecision struct {
	Index  uint64
	Time   time.Time
	Op     string
	Count  int
	Reason string
}

// ProvisionRequest is one entry of the provisioning outbox.
type ProvisionRequest struct {
	ID       string
	Pool     string
	Op       string // create | terminate
	Status   string // pending | failed | complete | canceled
	HostID   string `json:",omitempty"`
	NodeName string `json:",omitempty"`
	GroupKey string `json:",omitempty"`
	Reason   string
	Error    string `json:",omitempty"`
	Attempts int
	// NextAttempt is when a failed request is retried (zero: not set).
	NextAttempt time.Time `json:",omitempty"`
	CreateTime  time.Time
	ModifyTime  time.Time
	CreateIndex uint64
	ModifyIndex uint64
}

// Status returns the provisioning status of the node pool name.
func (n *NodePools) Status(name string, q *QueryOptions) (*NodePoolStatus, *QueryMeta, error) {
	var out NodePoolStatus
	qm, err := n.c.query("/v1/node/pool/"+url.PathEscape(name)+"/status", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}
