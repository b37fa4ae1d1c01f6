package structs

import (
	"slices"
	"sort"
	"testing"
)

// TestAllocatedTaskResourcesDeviceIDs checks the one helper every caller
// uses for a task's assigned device IDs: all types in order for DeviceIDs,
// GPUs only for GPUIDs, nil entries and a nil receiver tolerated, and the
// allocation-level DeviceIDs the union over its tasks.
func TestAllocatedTaskResourcesDeviceIDs(t *testing.T) {
	tr := &AllocatedTaskResources{Devices: []*AllocatedDeviceResource{
		{Vendor: "nvidia", Type: DeviceTypeGPU, Name: "H100", DeviceIDs: []string{"GPU-3", "GPU-5"}},
		nil,
		{Vendor: "mellanox", Type: "nic", Name: "CX7", DeviceIDs: []string{"NIC-0"}},
		{Vendor: "nvidia", Type: DeviceTypeGPU, Name: "A100", DeviceIDs: []string{"GPU-9"}, MemoryMB: 4096},
	}}
	if got, want := tr.DeviceIDs(), []string{"GPU-3", "GPU-5", "NIC-0", "GPU-9"}; !slices.Equal(got, want) {
		t.Fatalf("DeviceIDs = %v, want %v", got, want)
	}
	if got, want := tr.GPUIDs(), []string{"GPU-3", "GPU-5", "GPU-9"}; !slices.Equal(got, want) {
		t.Fatalf("GPUIDs = %v, want %v", got, want)
	}
	var none *AllocatedTaskResources
	if none.DeviceIDs() != nil || none.GPUIDs() != nil {
		t.Fatal("nil receiver: want nil IDs")
	}
	if ids := (&AllocatedTaskResources{CPU: 100}).GPUIDs(); ids != nil {
		t.Fatalf("no devices: GPUIDs = %v, want nil", ids)
	}

	a := &Allocation{AllocatedResources: &AllocatedResources{Tasks: map[string]*AllocatedTaskResources{
		"a": tr,
		"b": nil,
		"c": {Devices: []*AllocatedDeviceResource{{Type: DeviceTypeGPU, DeviceIDs: []string{"GPU-1"}}}},
	}}}
	got := a.DeviceIDs()
	sort.Strings(got)
	if want := []string{"GPU-1", "GPU-3", "GPU-5", "GPU-9", "NIC-0"}; !slices.Equal(got, want) {
		t.Fatalf("Allocation.DeviceIDs = %v, want %v", got, want)
	}
	if ids := (&Allocation{}).DeviceIDs(); ids != nil {
		t.Fatalf("no resources: %v", ids)
	}
}
