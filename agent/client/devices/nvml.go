//go:build cgo && linux

package devices

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpulayer/gpulayer/structs"
)

// Detect lists the host's NVIDIA GPUs through NVML (libnvidia-ml, loaded
// with nvml.New), grouped by model. See detectNVML.
func Detect() ([]*structs.DeviceGroup, error) {
	return detectNVML(nvml.New())
}

// detectNVML lists the GPUs that lib reports, grouped by model. It returns
// an error wrapping ErrUnavailable when lib cannot be initialised (no
// library, no driver, no GPU), and nil groups with a nil error when NVML
// works but reports no device. A device whose details cannot be read is
// reported unhealthy with the reason, in a group named UnreadableName. A
// GPU with MIG mode on is replaced by its MIG slices (see Group).
func detectNVML(lib nvml.Interface) ([]*structs.DeviceGroup, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, ret.Error())
	}
	defer func() { _ = lib.Shutdown() }()

	driverVersion, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		driverVersion = "unknown"
	}
	cudaVersion := "unknown"
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		// NVML encodes CUDA 12.4 as 12040.
		cudaVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: device count: %s", ErrUnavailable, ret.Error())
	}
	var gpus []GPU
	var broken []*structs.DeviceInstance
	for i := 0; i < count; i++ {
		g, err := readDevice(lib, i)
		if err != nil {
			broken = append(broken, &structs.DeviceInstance{ID: fmt.Sprintf("GPU-index-%d", i), Healthy: false, HealthDescription: err.Error()})
			continue
		}
		for _, one := range g {
			one.DriverVersion, one.CUDAVersion = driverVersion, cudaVersion
			gpus = append(gpus, one)
		}
	}
	groups := Group(gpus)
	if len(broken) > 0 {
		groups = append(groups, &structs.DeviceGroup{
			Vendor:     structs.DeviceVendorNvidia,
			Type:       structs.DeviceTypeGPU,
			Name:       UnreadableName,
			Attributes: map[string]*structs.Attribute{},
			Instances:  broken,
		})
	}
	return groups, nil
}

// readDevice returns the GPU at index i and, when MIG mode is on, its MIG
// slices after it.
func readDevice(lib nvml.Interface, i int) ([]GPU, error) {
	dev, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("device %d: handle: %s", i, ret.Error())
	}
	g, err := readOne(dev, fmt.Sprintf("device %d", i))
	if err != nil {
		return nil, err
	}
	out := []GPU{g}
	if cur, _, ret := dev.GetMigMode(); ret != nvml.SUCCESS || cur != nvml.DEVICE_MIG_ENABLE {
		return out, nil
	}
	out[0].MIGEnabled = true
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return out, nil
	}
	for j := 0; j < n; j++ {
		mig, ret := dev.GetMigDeviceHandleByIndex(j)
		if ret != nvml.SUCCESS {
			continue // no slice at this index
		}
		s, err := readOne(mig, fmt.Sprintf("device %d MIG %d", i, j))
		if err != nil {
			continue
		}
		s.MIGParent = g.UUID
		s.PCIBusID = g.PCIBusID
		if s.ComputeCapability == "" {
			s.ComputeCapability = g.ComputeCapability
		}
		out = append(out, s)
	}
	return out, nil
}

// readOne reads a GPU's or MIG slice's identity and memory.
func readOne(dev nvml.Device, what string) (GPU, error) {
	var g GPU
	var ret nvml.Return
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("%s: uuid: %s", what, ret.Error())
	}
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("%s: name: %s", what, ret.Error())
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("%s: memory: %s", what, ret.Error())
	}
	g.MemoryMiB = int64(mem.Total / (1024 * 1024))
	if major, minor, ret := dev.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = cString(pci.BusId[:])
	}
	return g, nil
}

// cString turns NVML's NUL-terminated int8 array into a string.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
