package structs

import "time"

// This file holds the types of node pools (Nomad's node_pool) and of
// GPUlayer's provisioning (issue 16): a pool's optional scaling policy,
// the node shape a provider makes, and the provision requests the leader
// records in Raft as an outbox before any provider call is made.

// Built-in node pools, as in Nomad: every node belongs to exactly one pool
// ("default" unless its client says otherwise), and "all" names every
// node when a job asks for it.
const (
	NodePoolDefault = "default"
	NodePoolAll     = "all"
)

// NodePool is a named set of nodes (Nomad's NodePool), with GPUlayer's
// optional scaling policy.
type NodePool struct {
	Name        string
	Description string            `json:",omitempty"`
	Meta        map[string]string `json:",omitempty"`
	// Scaling, when set, lets the leader grow the pool from blocked work
	// and shrink it when nodes fall idle (server/provision).
	Scaling *PoolScalingPolicy `json:",omitempty"`

	CreateIndex uint64
	ModifyIndex uint64
}

// PoolScalingPolicy is a pool's scaling block.
type PoolScalingPolicy struct {
	// Provider names the provider that makes the pool's hosts: "docker"
	// or "exec" (server/provision/docker, server/provision/exec).
	Provider string
	// ProviderConfig is the provider's free-form settings (exec: the
	// "command" to run; docker: the "image" and "network").
	ProviderConfig map[string]string `json:",omitempty"`
	// Min and Max bound the number of provisioned nodes (0 <= Min <= Max,
	// Max at most MaxPoolNodes).
	Min int
	Max int
	// Shape is what every host of the pool looks like.
	Shape NodeShape
	// Cooldown is the least time between two scaling decisions of the
	// pool; IdleAfter how long a node must stay idle before scale-in.
	Cooldown  time.Duration
	IdleAfter time.Duration
	// Idle is the rule that says a node is idle.
	Idle PoolIdleRule
	// Orphans says what the leader does with a host the provider lists as
	// the pool's but no provision request accounts for (found after a
	// leader failover): "terminate" (the default, also for "") or "adopt"
	// (record it as the pool's host).
	Orphans string `json:",omitempty"`
}

// Orphan host policies (PoolScalingPolicy.Orphans).
const (
	PoolOrphansTerminate = "terminate"
	PoolOrphansAdopt     = "adopt"
)

// MaxPoolNodes bounds a pool's Max.
const MaxPoolNodes = 1000

// PoolIdleRule says when a node of a pool counts as idle: when it runs no
// allocation (NoAllocations) and, when GPUUtilBelowPercent is above zero,
// when every GPU's utilisation stayed below that percentage for GPUUtilFor.
type PoolIdleRule struct {
	NoAllocations       bool
	GPUUtilBelowPercent int
	GPUUtilFor          time.Duration
}

// NodeShape is the node a provider makes: its class and simulated or real
// GPUs.
type NodeShape struct {
	NodeClass    string `json:",omitempty"`
	GPUModel     string `json:",omitempty"` // e.g. "NVIDIA H100 80GB HBM3"
	GPUCount     int
	GPUMemoryMB  int    `json:",omitempty"` // per GPU, MiB
	MemoryModel  string `json:",omitempty"` // discrete | unified
	Availability string `json:",omitempty"` // continuous | opportunistic
}

// Provision request operations and statuses.
const (
	ProvisionOpCreate    = "create"
	ProvisionOpTerminate = "terminate"

	ProvisionStatusPending  = "pending"  // recorded, no provider call has answered
	ProvisionStatusComplete = "complete" // the provider did it
	ProvisionStatusFailed   = "failed"   // last call failed; retried at NextAttempt
	ProvisionStatusCanceled = "canceled" // superseded (e.g. a gang's partial set)
)

// ProvisionRequest is one entry of the provisioning outbox: the leader
// records it in Raft, then the provisioner calls the provider outside any
// lock and applies the answer only while the request's ModifyIndex is
// unchanged.
type ProvisionRequest struct {
	ID   string
	Pool string
	Op   string // ProvisionOpCreate or ProvisionOpTerminate
	// IdempotencyKey is passed to the provider, which must make at most
	// one host per key (create) and treat a repeated terminate as done.
	IdempotencyKey string
	Shape          NodeShape
	// HostID is the provider's ID of the host (known after create; set
	// for terminate). NodeName is the node name the host joins as.
	HostID   string `json:",omitempty"`
	NodeName string `json:",omitempty"`
	// GroupKey ties the requests of one gang: all complete or all are
	// torn down.
	GroupKey string `json:",omitempty"`
	// Reason is the decision that made the request ("2 blocked evals need
	// nvidia/gpu x 1 of class a100: +2").
	Reason string
	Status string
	Error  string `json:",omitempty"`
	// Attempts counts provider calls; NextAttempt is the earliest next
	// call after a failure, in Unix nanoseconds (backoff).
	Attempts    int
	NextAttempt int64 `json:",omitempty"`
	CreateTime  int64
	ModifyTime  int64

	CreateIndex uint64
	ModifyIndex uint64
}
