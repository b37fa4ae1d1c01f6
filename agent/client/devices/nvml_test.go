//go:build cgo && linux

package devices

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpulayer/gpulayer/structs"
)

// TestDetectNVMLDGXH100 runs detection against go-nvml's DGX H100 mock:
// 8 healthy H100 instances in one group, with the mock's UUIDs, memory,
// compute capability and versions; a GPU whose memory cannot be read is
// listed unhealthy with the reason; a library that cannot start is
// ErrUnavailable.
func TestDetectNVMLDGXH100(t *testing.T) {
	t.Run("eight healthy H100s", func(t *testing.T) {
		h := newFakeHost(t)
		groups, err := detectNVML(h)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 1 {
			t.Fatalf("%d groups, want 1", len(groups))
		}
		g := groups[0]
		if g.Vendor != structs.DeviceVendorNvidia || g.Type != structs.DeviceTypeGPU || g.Name != "NVIDIA H100 80GB HBM3" {
			t.Fatalf("group %s", g.ID())
		}
		if g.MemoryMiB() != 81920 {
			t.Errorf("memory %d MiB, want 81920", g.MemoryMiB())
		}
		for attr, want := range map[string]string{"compute_capability": "9.0", "driver_version": "550.54.15", "cuda_version": "12.4", "memory_model": "discrete"} {
			if got := g.Attributes[attr].Text(); got != want {
				t.Errorf("%s = %q, want %q", attr, got, want)
			}
		}
		var got []string
		for i, in := range g.Instances {
			got = append(got, in.ID)
			if !in.Healthy || in.HealthDescription != HealthyDescription {
				t.Errorf("instance %s: healthy=%v %q", in.ID, in.Healthy, in.HealthDescription)
			}
			// Ordered by PCI bus ID: the mock gives GPU i the bus 0000:0i:00.0.
			if want := h.devs[i].PciBusID; in.Locality != want {
				t.Errorf("instance %d locality %q, want %q", i, in.Locality, want)
			}
		}
		want := h.uuids()
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("instances %v, want the mock's %v", got, want)
		}
	})
	t.Run("unreadable memory is unhealthy with the reason", func(t *testing.T) {
		h := newFakeHost(t)
		h.set(func() { h.memErr[h.devs[5].UUID] = nvml.ERROR_GPU_IS_LOST })
		groups, err := detectNVML(h)
		if err != nil {
			t.Fatal(err)
		}
		var healthy int
		var broken []*structs.DeviceInstance
		for _, g := range groups {
			for _, in := range g.Instances {
				if in.Healthy {
					healthy++
					continue
				}
				if g.Name != UnreadableName {
					t.Errorf("unhealthy instance %s in group %q", in.ID, g.Name)
				}
				broken = append(broken, in)
			}
		}
		if healthy != 7 || len(broken) != 1 {
			t.Fatalf("%d healthy, %d broken; want 7 and 1", healthy, len(broken))
		}
		if d := broken[0].HealthDescription; !strings.Contains(d, "memory") || !strings.Contains(d, "ERROR_GPU_IS_LOST") {
			t.Fatalf("description %q does not give the reason", d)
		}
	})
	t.Run("init failure is ErrUnavailable", func(t *testing.T) {
		h := newFakeHost(t)
		h.Interface.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
		if _, err := detectNVML(h); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("error %v does not wrap ErrUnavailable", err)
		}
	})
}

// migSlice is a MIG device handle for a GPU instance the mock created:
// go-nvml's mock models MIG mode and GPU instances but not MIG device
// handles, so the test builds those from the instances.
func migSlice(parent nvml.Device, uuid string, gi, ci int, memMiB uint64) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc:                            func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 3g.40gb", nvml.SUCCESS },
		GetMemoryInfoFunc:                      func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: memMiB << 20}, nvml.SUCCESS },
		GetCudaComputeCapabilityFunc:           func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		GetPciInfoFunc:                         func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return ci, nvml.SUCCESS },
	}
}

// withMIG turns MIG on for GPU 0 of h and splits it into two 3g.40gb GPU
// instances through the mock, each with one MIG device handle. It returns
// the slices' UUIDs.
func withMIG(t *testing.T, h *fakeHost) []string {
	t.Helper()
	dev := h.devs[0]
	if ret, _ := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatalf("set MIG mode: %v", ret)
	}
	profile, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("3g profile: %v", ret)
	}
	var slices []nvml.Device
	var uuids []string
	for i := 0; i < 2; i++ {
		gi, ret := dev.CreateGpuInstance(&profile)
		if ret != nvml.SUCCESS {
			t.Fatalf("create GPU instance: %v", ret)
		}
		info, _ := gi.GetInfo()
		uuid := "MIG-" + dev.UUID[len("GPU-"):] + "-" + string(rune('a'+i))
		uuids = append(uuids, uuid)
		slices = append(slices, migSlice(dev, uuid, int(info.Id), 0, profile.MemorySizeMB))
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < len(slices) {
			return slices[i], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	byUUID := h.Interface.DeviceGetHandleByUUIDFunc
	h.Interface.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		for i, u := range uuids {
			if u == uuid {
				return slices[i], nvml.SUCCESS
			}
		}
		return byUUID(uuid)
	}
	return uuids
}

// TestDetectNVMLMIG: a MIG-enabled H100 of the mock is replaced by its two
// 3g.40gb slices, with the profile's memory and the parent's compute
// capability; the other seven stay whole GPUs.
func TestDetectNVMLMIG(t *testing.T) {
	h := newFakeHost(t)
	uuids := withMIG(t, h)
	groups, err := detectNVML(h)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]string{}
	for _, g := range groups {
		for _, in := range g.Instances {
			ids[g.Name] = append(ids[g.Name], in.ID)
		}
		if g.Name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb" {
			if g.MemoryMiB() != 40960 || g.Attributes["compute_capability"].Text() != "9.0" || g.Attributes["mig"] == nil {
				t.Errorf("MIG group attributes: memory %d, cc %s, mig %v", g.MemoryMiB(), g.Attributes["compute_capability"].Text(), g.Attributes["mig"])
			}
		}
	}
	if got := ids["NVIDIA H100 80GB HBM3 MIG 3g.40gb"]; strings.Join(got, ",") != strings.Join(uuids, ",") {
		t.Errorf("MIG instances %v, want %v", got, uuids)
	}
	whole := ids["NVIDIA H100 80GB HBM3"]
	if len(whole) != 7 {
		t.Errorf("%d whole GPUs, want 7", len(whole))
	}
	for _, id := range whole {
		if id == h.devs[0].UUID {
			t.Errorf("MIG-enabled GPU %s is schedulable", id)
		}
	}
}
