package structs

import "maps"

// Built-in pool descriptions (Nomad's).
const (
	nodePoolDefaultDescription = "Default node pool."
	nodePoolAllDescription     = "Node pool with all nodes in the cluster."
)

// IsBuiltinNodePool reports whether name is "default" or "all": pools that
// exist without being written and cannot be deleted.
func IsBuiltinNodePool(name string) bool {
	return name == NodePoolDefault || name == NodePoolAll
}

// BuiltinNodePool returns the unwritten form of built-in pool name
// ("default" or "all", with Nomad's descriptions and zero indexes), or nil
// for another name.
func BuiltinNodePool(name string) *NodePool {
	switch name {
	case NodePoolDefault:
		return &NodePool{Name: NodePoolDefault, Description: nodePoolDefaultDescription}
	case NodePoolAll:
		return &NodePool{Name: NodePoolAll, Description: nodePoolAllDescription}
	}
	return nil
}

// NodePoolOrDefault returns pool, or NodePoolDefault when pool is empty:
// the pool a node or job with that NodePool field is in.
func NodePoolOrDefault(pool string) string {
	if pool == "" {
		return NodePoolDefault
	}
	return pool
}

// Copy returns a deep copy of the pool (nil for nil).
func (p *NodePool) Copy() *NodePool {
	if p == nil {
		return nil
	}
	c := *p
	c.Meta = maps.Clone(p.Meta)
	if p.Scaling != nil {
		s := *p.Scaling
		s.ProviderConfig = maps.Clone(p.Scaling.ProviderConfig)
		c.Scaling = &s
	}
	return &c
}

// Equal reports whether p and o hold the same fields, indexes included.
func (p *NodePool) Equal(o *NodePool) bool {
	if p == nil || o == nil {
		return p == o
	}
	if p.Name != o.Name || p.Description != o.Description || !maps.Equal(p.Meta, o.Meta) ||
		p.CreateIndex != o.CreateIndex || p.ModifyIndex != o.ModifyIndex {
		return false
	}
	if (p.Scaling == nil) != (o.Scaling == nil) {
		return false
	}
	if p.Scaling == nil {
		return true
	}
	a, b := p.Scaling, o.Scaling
	return a.Provider == b.Provider && maps.Equal(a.ProviderConfig, b.ProviderConfig) &&
		a.Min == b.Min && a.Max == b.Max && a.Shape == b.Shape &&
		a.Cooldown == b.Cooldown && a.IdleAfter == b.IdleAfter && a.Idle == b.Idle
}

// NodePoolUpsertRequest creates or replaces node pools (Raft type
// NodePoolUpsertRequestType). The state store refuses the whole entry
// when a pool fails Validate or is "all".
type NodePoolUpsertRequest struct {
	NodePools []*NodePool
}

// NodePoolDeleteRequest deletes node pools by name (Raft type
// NodePoolDeleteRequestType), all or none: a built-in pool, an unknown
// one, or one that a node or a live job uses refuses the entry.
type NodePoolDeleteRequest struct {
	Names []string
}
