package convert

import (
	"maps"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// nodePoolRead is the pool a read names for a node's or job's NodePool:
// empty is DefaultNodePool.
func nodePoolRead(pool string) string {
	if pool == "" {
		return DefaultNodePool
	}
	return pool
}

// NodePoolFromStructs renders a stored pool in Nomad's shape plus
// Scaling.
func NodePoolFromStructs(p *structs.NodePool) *api.NodePool {
	if p == nil {
		return nil
	}
	out := &api.NodePool{Name: p.Name, Description: p.Description, Meta: maps.Clone(p.Meta),
		CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex}
	if s := p.Scaling; s != nil {
		out.Scaling = &api.NodePoolScalingPolicy{Provider: s.Provider, ProviderConfig: maps.Clone(s.ProviderConfig), Min: s.Min, Max: s.Max,
			Shape: api.NodePoolShape{NodeClass: s.Shape.NodeClass, GPUModel: s.Shape.GPUModel, GPUCount: s.Shape.GPUCount,
				GPUMemoryMB: s.Shape.GPUMemoryMB, MemoryModel: s.Shape.MemoryModel, Availability: s.Shape.Availability},
			Cooldown: s.Cooldown, IdleAfter: s.IdleAfter,
			Idle: api.NodePoolIdleRule{NoAllocations: s.Idle.NoAllocations, GPUUtilBelowPercent: s.Idle.GPUUtilBelowPercent, GPUUtilFor: s.Idle.GPUUtilFor}}
	}
	return out
}

// NodePoolsFromStructs renders pools for a list.
func NodePoolsFromStructs(pools []*structs.NodePool) []*api.NodePool {
	out := make([]*api.NodePool, 0, len(pools))
	for _, p := range pools {
		out = append(out, NodePoolFromStructs(p))
	}
	return out
}

// NodePoolToStructs converts a written pool; indexes and
// SchedulerConfiguration are dropped (the HTTP layer refuses a set
// SchedulerConfiguration first).
func NodePoolToStructs(p *api.NodePool) *structs.NodePool {
	if p == nil {
		return nil
	}
	out := &structs.NodePool{Name: p.Name, Description: p.Description, Meta: maps.Clone(p.Meta)}
	if s := p.Scaling; s != nil {
		out.Scaling = &structs.PoolScalingPolicy{Provider: s.Provider, ProviderConfig: maps.Clone(s.ProviderConfig), Min: s.Min, Max: s.Max,
			Shape: structs.NodeShape{NodeClass: s.Shape.NodeClass, GPUModel: s.Shape.GPUModel, GPUCount: s.Shape.GPUCount,
				GPUMemoryMB: s.Shape.GPUMemoryMB, MemoryModel: s.Shape.MemoryModel, Availability: s.Shape.Availability},
			Cooldown: s.Cooldown, IdleAfter: s.IdleAfter,
			Idle: structs.PoolIdleRule{NoAllocations: s.Idle.NoAllocations, GPUUtilBelowPercent: s.Idle.GPUUtilBelowPercent, GPUUtilFor: s.Idle.GPUUtilFor}}
	}
	return out
}
