package agent

import (
	"fmt"
	"strings"

	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

// SimulatedGPUConfig declares simulated GPUs in the client block, for test
// clusters and the node simulator:
//
//	client {
//	  simulated_gpu {
//	    count       = 2
//	    model       = "NVIDIA A100-SXM4-80GB"
//	    memory      = 81920      # MiB per GPU
//	    mig_profile = "3g.40gb"  # optional: MIG on, each GPU split into
//	    mig_slices  = 2          # this many slices
//	    mig_memory  = 40192      # of this many MiB
//	  }
//	}
//
// The groups carry simulated = true.
type SimulatedGPUConfig struct {
	Count int `hcl:"count,optional"`
	// Model defaults to devices.SimulatedName, Memory to
	// devices.SimulatedMemoryMiB.
	Model  string `hcl:"model,optional"`
	Memory int64  `hcl:"memory,optional"`
	// MIGProfile, MIGSlices and MIGMemory, when MIGSlices is set, turn MIG
	// on: only the slices are schedulable.
	MIGProfile string `hcl:"mig_profile,optional"`
	MIGSlices  int    `hcl:"mig_slices,optional"`
	MIGMemory  int64  `hcl:"mig_memory,optional"`
	// IdleUtilization, when set (0 to 100), is the utilisation these GPUs
	// report while no allocation holds them, instead of the 0 to 2 % idle
	// pattern (GPUs of one model share one value: the last declaration's).
	IdleUtilization *int `hcl:"idle_utilization,optional"`
}

// validate names the bad fields of the i-th (from 1) declaration.
func (s *SimulatedGPUConfig) validate(i int) []string {
	var p []string
	where := fmt.Sprintf("client.simulated_gpu %d", i)
	if s.Count < 1 || s.Count > 64 {
		p = append(p, fmt.Sprintf("%s: count: must be between 1 and 64, got %d", where, s.Count))
	}
	if s.Memory < 0 {
		p = append(p, fmt.Sprintf("%s: memory: must be 0 or more MiB, got %d", where, s.Memory))
	}
	if s.MIGSlices < 0 || s.MIGSlices > 7 {
		p = append(p, fmt.Sprintf("%s: mig_slices: must be between 0 and 7, got %d", where, s.MIGSlices))
	}
	if u := s.IdleUtilization; u != nil && (*u < 0 || *u > 100) {
		p = append(p, fmt.Sprintf("%s: idle_utilization: must be between 0 and 100, got %d", where, *u))
	}
	if s.MIGSlices > 0 && (s.MIGProfile == "" || s.MIGMemory <= 0) {
		p = append(p, fmt.Sprintf("%s: mig_profile and mig_memory are required with mig_slices", where))
	}
	return p
}

// simulatedGroups turns declarations into device groups whose instance
// IDs are stable for seed (the agent's identity) and differ between
// declarations: "GPU-sim-<seed>-<decl>-<i>", MIG slices "MIG-sim-…".
func simulatedGroups(seed string, decls []*SimulatedGPUConfig) []*structs.DeviceGroup {
	var gpus []devices.GPU
	idle := map[string]int{} // model -> idle utilisation
	for d, s := range decls {
		model, mem := s.Model, s.Memory
		if model == "" {
			model = devices.SimulatedName
		}
		if s.IdleUtilization != nil {
			idle[model] = *s.IdleUtilization
		}
		if mem == 0 {
			mem = devices.SimulatedMemoryMiB
		}
		for i := 0; i < s.Count; i++ {
			g := devices.GPU{
				UUID: fmt.Sprintf("GPU-sim-%s-%d-%d", structs.ShortID(seed), d, i), Name: model, MemoryMiB: mem,
				ComputeCapability: devices.SimulatedComputeCapability, PCIBusID: fmt.Sprintf("00000000:%02X:%02X.0", d+1, i),
				DriverVersion: "simulated", CUDAVersion: "12.4",
			}
			if s.MIGSlices == 0 {
				gpus = append(gpus, g)
				continue
			}
			g.MIGEnabled = true
			gpus = append(gpus, g)
			for k := 0; k < s.MIGSlices; k++ {
				sl := g
				sl.MIGEnabled, sl.MIGParent = false, g.UUID
				sl.UUID = fmt.Sprintf("MIG-sim-%s-%d-%d-%d", structs.ShortID(seed), d, i, k)
				sl.Name, sl.MemoryMiB = model+" MIG "+s.MIGProfile, s.MIGMemory
				gpus = append(gpus, sl)
			}
		}
	}
	groups := devices.Group(gpus)
	for _, g := range groups {
		g.Attributes["simulated"] = structs.NewBoolAttribute(true)
		for model, u := range idle {
			if g.Name == model || strings.HasPrefix(g.Name, model+" MIG ") {
				g.Attributes[devices.AttrSimulatedIdleUtilization] = structs.NewIntAttribute(int64(u), "%")
			}
		}
	}
	return groups
}

// devGPUCount returns the client.Config.DevGPUs for the client block c: the
// explicit dev_gpus (or -dev-gpus) when set; 0 when simulated_gpu blocks are
// declared, because declared devices replace the default simulated GPUs of
// dev mode; otherwise -1, the client's default (2 in dev mode when no real
// GPU is found).
func devGPUCount(c *ClientConfig) int {
	switch {
	case c == nil:
		return -1
	case c.DevGPUs != nil:
		return *c.DevGPUs
	case len(c.SimulatedGPUs) > 0:
		return 0
	}
	return -1
}
