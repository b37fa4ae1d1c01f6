//go:build cgo && linux

package devices

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Usage is one device's NVML utilisation and memory reading.
type Usage struct {
	// UtilizationPercent is utilization.gpu: the percentage of the last
	// sample period (1/6 s to 1 s depending on the product) in which a
	// kernel ran.
	UtilizationPercent float64
	MemoryUsedMiB      int64
	MemoryTotalMiB     int64
}

// SampleNVML reads utilisation and memory for each NVIDIA device by UUID.
// A device that cannot be read gets an error in errs and no Usage. It
// returns an error wrapping ErrUnavailable when NVML cannot be used at all.
// NVML is initialised and shut down per call (reference counted by the
// library, so it is cheap while another user holds it).
func SampleNVML(uuids []string) (map[string]Usage, map[string]error, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("%w: %s", ErrUnavailable, nvml.ErrorString(ret))
	}
	defer func() { _ = nvml.Shutdown() }()
	out := map[string]Usage{}
	errs := map[string]error{}
	for _, id := range uuids {
		dev, ret := nvml.DeviceGetHandleByUUID(id)
		if ret != nvml.SUCCESS {
			errs[id] = fmt.Errorf("handle: %s", nvml.ErrorString(ret))
			continue
		}
		util, ret := dev.GetUtilizationRates()
		if ret != nvml.SUCCESS {
			errs[id] = fmt.Errorf("utilization: %s", nvml.ErrorString(ret))
			continue
		}
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			errs[id] = fmt.Errorf("memory: %s", nvml.ErrorString(ret))
			continue
		}
		out[id] = Usage{
			UtilizationPercent: float64(util.Gpu),
			MemoryUsedMiB:      int64(mem.Used / (1024 * 1024)),
			MemoryTotalMiB:     int64(mem.Total / (1024 * 1024)),
		}
	}
	return out, errs, nil
}
