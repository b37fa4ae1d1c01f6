package api

import (
	"slices"
	"testing"
)

// TestAllocatedTaskResourcesDeviceIDs checks the API-side twin of
// structs.AllocatedTaskResources.DeviceIDs: every device's IDs in order,
// nil entries skipped, nil receiver tolerated.
func TestAllocatedTaskResourcesDeviceIDs(t *testing.T) {
	tr := &AllocatedTaskResources{Devices: []*AllocatedDeviceResource{
		{Type: "gpu", DeviceIDs: []string{"GPU-1", "GPU-2"}}, nil, {Type: "gpu", DeviceIDs: []string{"GPU-7"}},
	}}
	if got, want := tr.DeviceIDs(), []string{"GPU-1", "GPU-2", "GPU-7"}; !slices.Equal(got, want) {
		t.Fatalf("DeviceIDs = %v, want %v", got, want)
	}
	var none *AllocatedTaskResources
	if none.DeviceIDs() != nil {
		t.Fatal("nil receiver: want nil")
	}
}
