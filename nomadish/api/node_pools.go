package api

import (
	"net/http"
	"net/url"
	"time"
)

// NodePool is a node pool in Nomad's JSON shape (GET /v1/node/pool/:name),
// with GPUlayer's additive Scaling. The built-in pools "default" and "all"
// always exist.
type NodePool struct {
	Name        string
	Description string            `json:",omitempty"`
	Meta        map[string]string `json:",omitempty"`
	// SchedulerConfiguration is Nomad Enterprise's per-pool scheduler
	// settings. GPUlayer has none: a write that sets it is refused.
	SchedulerConfiguration *NodePoolSchedulerConfiguration `json:",omitempty"`
	// Scaling is GPUlayer's scaling policy (not in Nomad): when set, the
	// leader grows the pool from blocked work and shrinks idle nodes.
	Scaling     *NodePoolScalingPolicy `json:",omitempty"`
	CreateIndex uint64
	ModifyIndex uint64
}

// NodePoolSchedulerConfiguration is Nomad's shape, accepted only empty.
type NodePoolSchedulerConfiguration struct {
	SchedulerAlgorithm            string `json:",omitempty"`
	MemoryOversubscriptionEnabled *bool  `json:",omitempty"`
}

// NodePoolScalingPolicy is a pool's scaling block. Durations encode in
// JSON as integer nanoseconds, as Nomad's do.
type NodePoolScalingPolicy struct {
	// Provider is "docker" or "exec".
	Provider string
	// ProviderConfig is the provider's settings (docker: "image",
	// "network"; exec: "command").
	ProviderConfig map[string]string `json:",omitempty"`
	// Min and Max bound the pool's provisioned nodes.
	Min int
	Max int
	// Shape is the node every host of the pool is.
	Shape NodePoolShape
	// Cooldown is the least time between two scaling decisions;
	// IdleAfter how long a node stays idle before it is removed.
	Cooldown  time.Duration
	IdleAfter time.Duration
	// Idle says when a node counts as idle.
	Idle NodePoolIdleRule
}

// NodePoolShape is the node a provider makes.
type NodePoolShape struct {
	NodeClass    string `json:",omitempty"`
	GPUModel     string `json:",omitempty"`
	GPUCount     int
	GPUMemoryMB  int    `json:",omitempty"` // per GPU, MiB
	MemoryModel  string `json:",omitempty"` // discrete | unified
	Availability string `json:",omitempty"` // continuous | opportunistic
}

// NodePoolIdleRule: a node is idle when it runs no allocation
// (NoAllocations) and, with GPUUtilBelowPercent above zero, when every GPU
// stayed below that utilisation for GPUUtilFor.
type NodePoolIdleRule struct {
	NoAllocations       bool
	GPUUtilBelowPercent int
	GPUUtilFor          time.Duration
}

// NodePoolUpsertRequest is the body of PUT /v1/node/pools (Nomad's).
type NodePoolUpsertRequest struct {
	NodePools []*NodePool
}

// NodePools is the client for the /v1/node/pools routes (Nomad's
// api.NodePools).
type NodePools struct{ c *Client }

// NodePools returns the node pools endpoints.
func (c *Client) NodePools() *NodePools { return &NodePools{c: c} }

// List returns every node pool, the built-ins included, filtered by
// q.Prefix on the name.
func (n *NodePools) List(q *QueryOptions) ([]*NodePool, *QueryMeta, error) {
	var out []*NodePool
	qm, err := n.c.query("/v1/node/pools", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// PrefixList returns the node pools whose name starts with prefix.
func (n *NodePools) PrefixList(prefix string, q *QueryOptions) ([]*NodePool, *QueryMeta, error) {
	if q == nil {
		q = &QueryOptions{}
	}
	qc := *q
	qc.Prefix = prefix
	return n.List(&qc)
}

// Info returns the node pool name.
func (n *NodePools) Info(name string, q *QueryOptions) (*NodePool, *QueryMeta, error) {
	var out NodePool
	qm, err := n.c.query("/v1/node/pool/"+url.PathEscape(name), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Register creates or replaces pool.
func (n *NodePools) Register(pool *NodePool, w *WriteOptions) (*WriteMeta, error) {
	return n.c.write(http.MethodPut, "/v1/node/pools", nil, &NodePoolUpsertRequest{NodePools: []*NodePool{pool}}, nil, w)
}

// Delete deletes the node pool name; built-in pools and pools in use
// cannot be deleted.
func (n *NodePools) Delete(name string, w *WriteOptions) (*WriteMeta, error) {
	return n.c.write(http.MethodDelete, "/v1/node/pool/"+url.PathEscape(name), nil, nil, nil, w)
}

// ListNodes returns the nodes of pool name ("all": every node).
func (n *NodePools) ListNodes(name string, q *QueryOptions) ([]*NodeListStub, *QueryMeta, error) {
	var out []*NodeListStub
	qm, err := n.c.query("/v1/node/pool/"+url.PathEscape(name)+"/nodes", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// ListJobs returns the jobs of pool name the token may read.
func (n *NodePools) ListJobs(name string, q *QueryOptions) ([]*JobListStub, *QueryMeta, error) {
	var out []*JobListStub
	qm, err := n.c.query("/v1/node/pool/"+url.PathEscape(name)+"/jobs", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}
