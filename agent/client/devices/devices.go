// Package devices finds the GPUs of a client node: NVIDIA GPUs through NVML
// (cgo builds on Linux), and simulated GPUs for development and tests.
package devices

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// ErrUnavailable is wrapped by Detect's error when no GPU library can be
// used: a build without cgo, or a host without libnvidia-ml.
var ErrUnavailable = errors.New("nvml unavailable")

// UnreadableName is the name of the group of NVIDIA GPUs whose details
// NVML could not read at detection: they are listed unhealthy, under
// "GPU-index-<i>" IDs that are not UUIDs, so no health source watches them.
const UnreadableName = "Unreadable NVIDIA GPU"

// GPU is one detected device before grouping.
type GPU struct {
	UUID string
	// Name is the model, e.g. "NVIDIA H100 80GB HBM3".
	Name string
	// MemoryMiB is the device's total memory in MiB.
	MemoryMiB int64
	// ComputeCapability is "major.minor", e.g. "9.0".
	ComputeCapability string
	// PCIBusID is e.g. "00000000:3B:00.0".
	PCIBusID      string
	DriverVersion string
	// CUDAVersion is "major.minor" of the driver's CUDA API, e.g. "12.4".
	CUDAVersion string
	// MIGEnabled marks a GPU with MIG mode on: it is not schedulable
	// itself; its MIG slices are listed as GPUs of their own.
	MIGEnabled bool
	// MIGParent is, for a MIG slice, the UUID of its GPU; its UUID is the
	// slice's "MIG-…" UUID and Name "<model> MIG <profile>".
	MIGParent string
}

// Group puts identical GPUs (same model, memory, compute capability,
// driver and CUDA version) into one structs.DeviceGroup each, with one
// healthy instance per GPU, ordered by model name then PCI bus ID. A GPU
// with MIG enabled is left out (only its slices can be scheduled); groups
// of MIG slices carry the attribute mig = true.
func Group(gpus []GPU) []*structs.DeviceGroup {
	type key struct {
		name, cc, drv, cuda string
		mem                 int64
	}
	byKey := map[key]*structs.DeviceGroup{}
	var order []key
	sorted := append([]GPU(nil), gpus...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Name != sorted[j].Name {
			return sorted[i].Name < sorted[j].Name
		}
		return sorted[i].PCIBusID < sorted[j].PCIBusID
	})
	for _, g := range sorted {
		if g.MIGEnabled {
			continue
		}
		k := key{g.Name, g.ComputeCapability, g.DriverVersion, g.CUDAVersion, g.MemoryMiB}
		grp, ok := byKey[k]
		if !ok {
			grp = &structs.DeviceGroup{
				Vendor: structs.DeviceVendorNvidia,
				Type:   structs.DeviceTypeGPU,
				Name:   g.Name,
				Attributes: map[string]*structs.Attribute{
					"memory":             structs.NewIntAttribute(g.MemoryMiB, "MiB"),
					"compute_capability": structs.NewStringAttribute(g.ComputeCapability),
					"driver_version":     structs.NewStringAttribute(g.DriverVersion),
					"cuda_version":       structs.NewStringAttribute(g.CUDAVersion),
					"memory_model":       structs.NewStringAttribute(structs.MemoryModelDiscrete),
				},
			}
			if g.MIGParent != "" {
				grp.Attributes["mig"] = structs.NewBoolAttribute(true)
			}
			byKey[k] = grp
			order = append(order, k)
		}
		grp.Instances = append(grp.Instances, &structs.DeviceInstance{ID: g.UUID, Healthy: true, HealthDescription: "healthy", Locality: g.PCIBusID})
	}
	out := make([]*structs.DeviceGroup, 0, len(order))
	for _, k := range order {
		out = append(out, byKey[k])
	}
	return out
}

// Simulated NVIDIA GPU figures: an H100-like 80 GiB part.
const (
	SimulatedName              = "Simulated NVIDIA GPU"
	SimulatedMemoryMiB         = 81920
	SimulatedComputeCapability = "9.0"
)

// Simulated returns a group of n simulated NVIDIA GPUs whose instance IDs
// are stable for a node: "GPU-sim-<first 8 characters of nodeID>-<i>". The
// group carries the attribute simulated = true. n <= 0 returns nil.
func Simulated(nodeID string, n int) *structs.DeviceGroup {
	if n <= 0 {
		return nil
	}
	g := &structs.DeviceGroup{
		Vendor: structs.DeviceVendorNvidia,
		Type:   structs.DeviceTypeGPU,
		Name:   SimulatedName,
		Attributes: map[string]*structs.Attribute{
			"memory":             structs.NewIntAttribute(SimulatedMemoryMiB, "MiB"),
			"compute_capability": structs.NewStringAttribute(SimulatedComputeCapability),
			"driver_version":     structs.NewStringAttribute("simulated"),
			"cuda_version":       structs.NewStringAttribute("12.4"),
			"memory_model":       structs.NewStringAttribute(structs.MemoryModelDiscrete),
			"simulated":          structs.NewBoolAttribute(true),
		},
	}
	for i := 0; i < n; i++ {
		g.Instances = append(g.Instances, &structs.DeviceInstance{
			ID:                fmt.Sprintf("GPU-sim-%s-%d", structs.ShortID(nodeID), i),
			Healthy:           true,
			HealthDescription: "simulated",
			Locality:          fmt.Sprintf("00000000:%02X:00.0", i+1),
		})
	}
	return g
}
