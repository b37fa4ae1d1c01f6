package structs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validPool() *NodePool {
	return &NodePool{Name: "gpu-a100_1", Description: "d", Meta: map[string]string{"k": "v"},
		Scaling: &PoolScalingPolicy{Provider: "exec", ProviderConfig: map[string]string{"command": "/bin/true"}, Min: 1, Max: 4,
			Shape:    NodeShape{NodeClass: "a100", GPUModel: "NVIDIA A100", GPUCount: 8, GPUMemoryMB: 81920, MemoryModel: "discrete", Availability: "opportunistic"},
			Cooldown: time.Minute, IdleAfter: 24 * time.Hour, Idle: PoolIdleRule{NoAllocations: true, GPUUtilBelowPercent: 100, GPUUtilFor: time.Hour}}}
}

func TestNodePoolValidate(t *testing.T) {
	if err := validPool().Validate(); err != nil {
		t.Fatalf("valid pool: %v", err)
	}
	if err := (&NodePool{Name: strings.Repeat("a", 128)}).Validate(); err != nil {
		t.Fatalf("128-byte name: %v", err)
	}
	cases := []struct {
		name, want string
		mut        func(p *NodePool)
	}{
		{"empty name", "name", func(p *NodePool) { p.Name = "" }},
		{"long name", "name", func(p *NodePool) { p.Name = strings.Repeat("a", 129) }},
		{"name with space", "name", func(p *NodePool) { p.Name = "a b" }},
		{"name with slash", "name", func(p *NodePool) { p.Name = "a/b" }},
		{"description", "description", func(p *NodePool) { p.Description = strings.Repeat("x", 257) }},
		{"meta keys", "meta: at most", func(p *NodePool) {
			for i := 0; i <= MaxNodePoolMetaKeys; i++ {
				p.Meta[strings.Repeat("k", i+1)] = "v"
			}
		}},
		{"meta empty key", "meta: a key", func(p *NodePool) { p.Meta[""] = "v" }},
		{"meta value", `meta "k"`, func(p *NodePool) { p.Meta["k"] = strings.Repeat("v", MaxNodePoolMetaValueLen+1) }},
		{"no provider", "provider: required", func(p *NodePool) { p.Scaling.Provider = "" }},
		{"unknown provider", `provider "aws"`, func(p *NodePool) { p.Scaling.Provider = "aws" }},
		{"min negative", "min must be", func(p *NodePool) { p.Scaling.Min = -1 }},
		{"min over max", "must not exceed max", func(p *NodePool) { p.Scaling.Min = 5 }},
		{"max over bound", "max must be", func(p *NodePool) { p.Scaling.Max = MaxPoolNodes + 1 }},
		{"cooldown negative", "cooldown", func(p *NodePool) { p.Scaling.Cooldown = -time.Second }},
		{"idle_after long", "idle_after", func(p *NodePool) { p.Scaling.IdleAfter = 25 * time.Hour }},
		{"gpu_count", "gpu_count", func(p *NodePool) { p.Scaling.Shape.GPUCount = 17 }},
		{"gpu_count negative", "gpu_count", func(p *NodePool) { p.Scaling.Shape.GPUCount = -1 }},
		{"gpu_memory_mb", "gpu_memory_mb", func(p *NodePool) { p.Scaling.Shape.GPUMemoryMB = MaxPoolGPUMemoryMB + 1 }},
		{"memory_model", "memory_model", func(p *NodePool) { p.Scaling.Shape.MemoryModel = "shared" }},
		{"availability", "availability", func(p *NodePool) { p.Scaling.Shape.Availability = "spot" }},
		{"node_class", "node_class", func(p *NodePool) { p.Scaling.Shape.NodeClass = strings.Repeat("c", 257) }},
		{"percent", "gpu_util_below", func(p *NodePool) { p.Scaling.Idle.GPUUtilBelowPercent = 101 }},
		{"percent negative", "gpu_util_below", func(p *NodePool) { p.Scaling.Idle.GPUUtilBelowPercent = -1 }},
		{"gpu_util_for", "gpu_util_for", func(p *NodePool) { p.Scaling.Idle.GPUUtilFor = 48 * time.Hour }},
		{"config key", "config: key", func(p *NodePool) { p.Scaling.ProviderConfig["a b"] = "x" }},
		{"config value", `config "command"`, func(p *NodePool) {
			p.Scaling.ProviderConfig["command"] = strings.Repeat("x", MaxProviderConfigValueLen+1)
		}},
		{"config keys", "config: at most", func(p *NodePool) {
			for i := 0; i <= MaxProviderConfigKeys; i++ {
				p.Scaling.ProviderConfig[strings.Repeat("k", i+1)] = "v"
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := validPool()
			c.mut(p)
			err := p.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalid naming %q", err, c.want)
			}
			if len(err.Error()) > 8192 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		})
	}
	if err := (*NodePool)(nil).Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil: %v", err)
	}
}

func TestNodePoolCopyEqual(t *testing.T) {
	p := validPool()
	c := p.Copy()
	if !p.Equal(c) {
		t.Fatal("copy differs")
	}
	c.Meta["k"] = "w"
	c.Scaling.ProviderConfig["command"] = "x"
	if p.Meta["k"] != "v" || p.Scaling.ProviderConfig["command"] != "/bin/true" || p.Equal(c) {
		t.Fatal("copy shares maps")
	}
	c = p.Copy()
	c.Scaling.Idle.GPUUtilFor = time.Second
	if p.Equal(c) {
		t.Fatal("Equal missed a scaling change")
	}
}
