package structs

import (
	"fmt"
	"math"
)

// Bounds of the GPU usage a client sends with its heartbeat.
const (
	// MaxHeartbeatGPUs is the most GPU samples one heartbeat may carry.
	MaxHeartbeatGPUs = 64
	// MaxGPUUsageIDLen bounds a sample's device instance ID.
	MaxGPUUsageIDLen = 128
	// MaxGPUMemoryMiB bounds a sample's memory figure (16 TiB).
	MaxGPUMemoryMiB = 1 << 24
)

// GPUUsage is one GPU's latest telemetry as its client sampled it, sent
// with the heartbeat (NodeHeartbeatHTTPRequest.GPUs) so the leader can
// evaluate a node pool's GPU idleness rule.
type GPUUsage struct {
	// ID is the device instance ID, as in DeviceInstance.ID.
	ID string
	// UtilizationPercent is 0 to 100, as in DeviceStats.
	UtilizationPercent float64
	MemoryUsedMiB      int64
	// Failed is true when the client could not read the device: the
	// sample never counts as idle.
	Failed bool `json:",omitempty"`
}

// ValidateGPUUsage checks a heartbeat's GPU samples: at most
// MaxHeartbeatGPUs, each with a unique non-empty ID of at most
// MaxGPUUsageIDLen bytes, a utilisation between 0 and 100 and a memory
// figure between 0 and MaxGPUMemoryMiB. Errors wrap ErrInvalid and name
// the field.
func ValidateGPUUsage(gpus []*GPUUsage) error {
	if len(gpus) > MaxHeartbeatGPUs {
		return fmt.Errorf("%w: GPUs: at most %d samples, got %d", ErrInvalid, MaxHeartbeatGPUs, len(gpus))
	}
	seen := make(map[string]bool, len(gpus))
	for i, g := range gpus {
		switch {
		case g == nil:
			return fmt.Errorf("%w: GPUs[%d]: must not be null", ErrInvalid, i)
		case g.ID == "" || len(g.ID) > MaxGPUUsageIDLen:
			return fmt.Errorf("%w: GPUs[%d].ID: must be 1 to %d bytes", ErrInvalid, i, MaxGPUUsageIDLen)
		case seen[g.ID]:
			return fmt.Errorf("%w: GPUs[%d].ID: %q repeated", ErrInvalid, i, g.ID)
		case math.IsNaN(g.UtilizationPercent) || g.UtilizationPercent < 0 || g.UtilizationPercent > 100:
			return fmt.Errorf("%w: GPUs[%d].UtilizationPercent: must be between 0 and 100, got %v", ErrInvalid, i, g.UtilizationPercent)
		case g.MemoryUsedMiB < 0 || g.MemoryUsedMiB > MaxGPUMemoryMiB:
			return fmt.Errorf("%w: GPUs[%d].MemoryUsedMiB: must be between 0 and %d, got %d", ErrInvalid, i, MaxGPUMemoryMiB, g.MemoryUsedMiB)
		}
		seen[g.ID] = true
	}
	return nil
}
