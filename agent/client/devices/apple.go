package devices

import (
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// AppleGPUName is the model name used when the chip name is unknown.
const AppleGPUName = "Apple Silicon GPU"

// AppleGroup returns the one apple/gpu of an Apple Silicon host whose chip
// is chip (sysctl machdep.cpu.brand_string, e.g. "Apple M2 Max") and whose
// host memory is hostMiB (sysctl hw.memsize): unified memory, so its
// "memory" attribute is the host memory less structs.UnifiedOSReserveMiB,
// the most a GPU allocation may take. Its instance ID is "apple-gpu-0". It
// returns nil when hostMiB is not positive.
func AppleGroup(chip string, hostMiB int64) *structs.DeviceGroup {
	if hostMiB <= 0 {
		return nil
	}
	name := strings.TrimSpace(chip)
	if name == "" {
		name = AppleGPUName
	}
	return &structs.DeviceGroup{
		Vendor: structs.DeviceVendorApple,
		Type:   structs.DeviceTypeGPU,
		Name:   name,
		Attributes: map[string]*structs.Attribute{
			"memory":       structs.NewIntAttribute(max(hostMiB-structs.UnifiedOSReserveMiB(hostMiB), 0), "MiB"),
			"memory_model": structs.NewStringAttribute(structs.MemoryModelUnified),
		},
		Instances: []*structs.DeviceInstance{{ID: "apple-gpu-0", Healthy: true, HealthDescription: "healthy"}},
	}
}
