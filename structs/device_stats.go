package structs

// DeviceStats is one device instance's telemetry as its client last
// sampled it (NVML for NVIDIA GPUs; a generated pattern for simulated
// ones, with Simulated set).
type DeviceStats struct {
	// ID is the instance ID, as in DeviceInstance.ID.
	ID     string
	Vendor string
	Type   string
	// Name is the model, as in DeviceGroup.Name.
	Name    string
	Healthy bool
	// UtilizationPercent is the share of the last sample period in which
	// a kernel ran on the device, 0 to 100 (NVML's utilization.gpu).
	UtilizationPercent float64
	// MemoryUsedMiB and MemoryTotalMiB are device memory in MiB.
	MemoryUsedMiB  int64
	MemoryTotalMiB int64
	// Simulated is true when the figures are made up (a simulated GPU).
	Simulated bool
	// AllocID is the allocation on this client that holds the device, ""
	// when none does.
	AllocID string
	// SampledAt is when the figures were read, in Unix nanoseconds.
	SampledAt int64
	// Error is why the device could not be read this time, if it could not.
	Error string `json:",omitempty"`
}

// NodeDeviceStats is a client's latest telemetry for all its devices.
type NodeDeviceStats struct {
	NodeID string
	// SampledAt is when the sample was taken, in Unix nanoseconds; zero
	// before the first sample.
	SampledAt int64
	// IntervalSeconds is the sampling period in seconds.
	IntervalSeconds float64
	Devices         []*DeviceStats
}

// Copy returns a deep copy.
func (s *NodeDeviceStats) Copy() *NodeDeviceStats {
	if s == nil {
		return nil
	}
	c := *s
	c.Devices = make([]*DeviceStats, len(s.Devices))
	for i, d := range s.Devices {
		if d != nil {
			dc := *d
			c.Devices[i] = &dc
		}
	}
	return &c
}
