package structs

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Bounds on a node pool, checked by (*NodePool).Validate. Every input is
// bounded so a pool written through the API cannot grow the Raft log or
// the state without limit.
const (
	// MaxNodePoolNameLen is Nomad's bound on a pool's name.
	MaxNodePoolNameLen = 128
	// MaxNodePoolDescriptionLen bounds Description, in bytes (Nomad's).
	MaxNodePoolDescriptionLen = 256
	// MaxNodePoolMetaKeys, MaxNodePoolMetaKeyLen and
	// MaxNodePoolMetaValueLen bound Meta (keys; bytes).
	MaxNodePoolMetaKeys     = 64
	MaxNodePoolMetaKeyLen   = 128
	MaxNodePoolMetaValueLen = 1024
	// MaxProviderConfigKeys and MaxProviderConfigValueLen bound a scaling
	// policy's ProviderConfig (keys; bytes per value). Keys match
	// providerConfigKeyRe.
	MaxProviderConfigKeys     = 32
	MaxProviderConfigValueLen = 4096
	// MaxPoolGPUCount bounds NodeShape.GPUCount.
	MaxPoolGPUCount = 16
	// MaxPoolGPUMemoryMB bounds NodeShape.GPUMemoryMB (MiB per GPU: 1 TiB).
	MaxPoolGPUMemoryMB = 1 << 20
	// MaxPoolShapeStringLen bounds NodeShape.NodeClass and GPUModel (bytes).
	MaxPoolShapeStringLen = 256
	// MaxPoolDuration bounds Cooldown, IdleAfter and Idle.GPUUtilFor.
	MaxPoolDuration = 24 * time.Hour
	// MaxNodePoolsPerRequest bounds the pools of one upsert.
	MaxNodePoolsPerRequest = 64
	// MaxNodePools bounds the pools of a cluster, the built-ins not
	// counted: an upsert or a node registering into a new pool past it is
	// refused (each pool is a row every server keeps and the provisioner
	// visits).
	MaxNodePools = 1024
)

// Pool providers GPUlayer ships (server/provision/docker, .../exec).
const (
	PoolProviderDocker = "docker"
	PoolProviderExec   = "exec"
)

var (
	// nodePoolNameRe is Nomad's validNodePoolName.
	nodePoolNameRe      = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,128}$`)
	providerConfigKeyRe = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)
)

// ValidNodePoolName reports whether name is a well-formed pool name:
// 1 to 128 letters, digits, '-' or '_' (Nomad's rule).
func ValidNodePoolName(name string) bool { return nodePoolNameRe.MatchString(name) }

// Validate checks every field of the pool and returns an error wrapping
// ErrInvalid that names each bad field (`node pool "gpu": scaling: max
// must be at most 1000, got 5000`), or nil. It does not check whether
// the pool may be written (built-ins): the state store does.
func (p *NodePool) Validate() error {
	if p == nil {
		return fmt.Errorf("%w: node pool: must not be null", ErrInvalid)
	}
	var probs []string
	add := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	if !ValidNodePoolName(p.Name) {
		add("name %q: must be 1 to %d letters, digits, '-' or '_'", truncateForError(p.Name), MaxNodePoolNameLen)
	}
	if len(p.Description) > MaxNodePoolDescriptionLen {
		add("description: at most %d bytes, got %d", MaxNodePoolDescriptionLen, len(p.Description))
	}
	if len(p.Meta) > MaxNodePoolMetaKeys {
		add("meta: at most %d keys, got %d", MaxNodePoolMetaKeys, len(p.Meta))
	} else {
		for _, k := range sortedKeys(p.Meta) {
			switch {
			case k == "":
				add("meta: a key must not be empty")
			case len(k) > MaxNodePoolMetaKeyLen:
				add("meta: key %q: at most %d bytes", truncateForError(k), MaxNodePoolMetaKeyLen)
			case len(p.Meta[k]) > MaxNodePoolMetaValueLen:
				add("meta %q: value at most %d bytes, got %d", k, MaxNodePoolMetaValueLen, len(p.Meta[k]))
			}
		}
	}
	if p.Scaling != nil {
		for _, s := range p.Scaling.problems() {
			add("scaling: %s", s)
		}
	}
	if len(probs) == 0 {
		return nil
	}
	if len(probs) > MaxShownProblems {
		probs = append(probs[:MaxShownProblems], fmt.Sprintf("... and %d more problems", len(probs)-MaxShownProblems))
	}
	return fmt.Errorf("%w: node pool %q: %s", ErrInvalid, truncateForError(p.Name), strings.Join(probs, "; "))
}

// problems lists what is wrong with the scaling policy.
func (s *PoolScalingPolicy) problems() []string {
	var probs []string
	add := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	switch s.Provider {
	case PoolProviderDocker, PoolProviderExec:
	case "":
		add("provider: required (%q or %q)", PoolProviderDocker, PoolProviderExec)
	default:
		add("provider %q: must be %q or %q", truncateForError(s.Provider), PoolProviderDocker, PoolProviderExec)
	}
	if s.Min < 0 {
		add("min must be at least 0, got %d", s.Min)
	}
	if s.Max < 0 || s.Max > MaxPoolNodes {
		add("max must be between 0 and %d, got %d", MaxPoolNodes, s.Max)
	}
	if s.Min > s.Max {
		add("min (%d) must not exceed max (%d)", s.Min, s.Max)
	}
	checkDur := func(name string, d time.Duration) {
		if d < 0 || d > MaxPoolDuration {
			add("%s must be between 0s and %s, got %s", name, MaxPoolDuration, d)
		}
	}
	checkDur("cooldown", s.Cooldown)
	checkDur("idle_after", s.IdleAfter)
	switch s.Orphans {
	case "", PoolOrphansTerminate, PoolOrphansAdopt:
	default:
		add("orphans %q: must be %q or %q", truncateForError(s.Orphans), PoolOrphansTerminate, PoolOrphansAdopt)
	}
	sh := s.Shape
	if len(sh.NodeClass) > MaxPoolShapeStringLen {
		add("shape: node_class: at most %d bytes", MaxPoolShapeStringLen)
	}
	if len(sh.GPUModel) > MaxPoolShapeStringLen {
		add("shape: gpu_model: at most %d bytes", MaxPoolShapeStringLen)
	}
	if sh.GPUCount < 0 || sh.GPUCount > MaxPoolGPUCount {
		add("shape: gpu_count must be between 0 and %d, got %d", MaxPoolGPUCount, sh.GPUCount)
	}
	if sh.GPUMemoryMB < 0 || sh.GPUMemoryMB > MaxPoolGPUMemoryMB {
		add("shape: gpu_memory_mb must be between 0 and %d, got %d", MaxPoolGPUMemoryMB, sh.GPUMemoryMB)
	}
	switch sh.MemoryModel {
	case "", MemoryModelDiscrete, MemoryModelUnified:
	default:
		add("shape: memory_model %q: must be %q or %q", truncateForError(sh.MemoryModel), MemoryModelDiscrete, MemoryModelUnified)
	}
	switch sh.Availability {
	case "", AvailabilityContinuous, AvailabilityOpportunistic:
	default:
		add("shape: availability %q: must be %q or %q", truncateForError(sh.Availability), AvailabilityContinuous, AvailabilityOpportunistic)
	}
	if p := s.Idle.GPUUtilBelowPercent; p < 0 || p > 100 {
		add("idle: gpu_util_below must be between 0 and 100 (percent), got %d", p)
	}
	if d := s.Idle.GPUUtilFor; d < 0 || d > MaxPoolDuration {
		add("idle: gpu_util_for must be between 0s and %s, got %s", MaxPoolDuration, d)
	}
	if len(s.ProviderConfig) > MaxProviderConfigKeys {
		add("config: at most %d keys, got %d", MaxProviderConfigKeys, len(s.ProviderConfig))
	} else {
		for _, k := range sortedKeys(s.ProviderConfig) {
			if !providerConfigKeyRe.MatchString(k) {
				add("config: key %q: must be 1 to 64 letters, digits, '_', '.' or '-'", truncateForError(k))
			} else if len(s.ProviderConfig[k]) > MaxProviderConfigValueLen {
				add("config %q: value at most %d bytes, got %d", k, MaxProviderConfigValueLen, len(s.ProviderConfig[k]))
			}
		}
	}
	return probs
}

// truncateForError shortens client input quoted in an error to 64 bytes.
func truncateForError(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
