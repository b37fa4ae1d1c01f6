package devices

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// SimulatedMIG returns a simulated GPU with MIG mode on and its slices,
// for tests and the node simulator: the parent (MIGEnabled, so Group
// leaves it out) and slices of the profile, each with sliceMiB of memory
// and the UUID "MIG-sim-<first 8 characters of nodeID>-<gpu>-<i>". It
// returns nil for slices <= 0.
func SimulatedMIG(nodeID string, gpu int, profile string, sliceMiB int64, slices int) []GPU {
	if slices <= 0 {
		return nil
	}
	parent := GPU{
		UUID:              fmt.Sprintf("GPU-sim-%s-mig%d", structs.ShortID(nodeID), gpu),
		Name:              SimulatedName,
		MemoryMiB:         SimulatedMemoryMiB,
		ComputeCapability: SimulatedComputeCapability,
		PCIBusID:          fmt.Sprintf("00000000:%02X:00.0", 0x80+gpu),
		DriverVersion:     "simulated",
		CUDAVersion:       "12.4",
		MIGEnabled:        true,
	}
	out := []GPU{parent}
	for i := 0; i < slices; i++ {
		s := parent
		s.MIGEnabled = false
		s.MIGParent = parent.UUID
		s.UUID = fmt.Sprintf("MIG-sim-%s-%d-%d", structs.ShortID(nodeID), gpu, i)
		s.Name = SimulatedName + " MIG " + profile
		s.MemoryMiB = sliceMiB
		out = append(out, s)
	}
	return out
}
