package structs

import (
	"strings"
	"testing"
)

func TestAllocsFit(t *testing.T) {
	node := func(unified bool) *Node {
		n := &Node{ID: "n", NodeResources: &NodeResources{CPU: 10000, MemoryMB: 64 * 1024, Devices: []*DeviceGroup{{
			Vendor: "nvidia", Type: "gpu", Name: "H100",
			Attributes: map[string]*Attribute{"memory": NewIntAttribute(80, "GiB")},
			Instances:  []*DeviceInstance{{ID: "g0", Healthy: true}, {ID: "g1", Healthy: false}},
		}}}, ReservedResources: &NodeReservedResources{MemoryMB: 1024}}
		if unified {
			n.MemoryModel = MemoryModelUnified
		}
		return n
	}
	alloc := func(id string, created uint64, memMiB, shareMiB int64, ids ...string) *Allocation {
		return &Allocation{ID: id, CreateIndex: created, ClientStatus: AllocClientStatusRunning, AllocatedResources: &AllocatedResources{
			Tasks: map[string]*AllocatedTaskResources{"t": {CPU: 100, MemoryMB: memMiB, Devices: []*AllocatedDeviceResource{{
				Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: ids, MemoryMB: shareMiB}}}}}}
	}
	cases := []struct {
		name    string
		unified bool
		allocs  []*Allocation
		want    string // "" fits
	}{
		{"shares within 80 GiB", false, []*Allocation{alloc("a", 0, 1, 40960, "g0"), alloc("b", 0, 1, 40960, "g0")}, ""},
		{"shares over 80 GiB", false, []*Allocation{alloc("a", 0, 1, 40960, "g0"), alloc("b", 0, 1, 40961, "g0")}, "memory shares of 81921 MiB exceed its 81920 MiB"},
		{"whole and share", false, []*Allocation{alloc("a", 0, 1, 0, "g0"), alloc("b", 0, 1, 1, "g0")}, "held whole by alloc"},
		{"new on unhealthy", false, []*Allocation{alloc("a", 0, 1, 0, "g1")}, "instance is unhealthy"},
		{"placed on since-unhealthy keeps it", false, []*Allocation{alloc("a", 7, 1, 0, "g1")}, ""},
		{"new on unknown", false, []*Allocation{alloc("a", 0, 1, 0, "gX")}, "no such instance"},
		{"placed on since-removed keeps it", false, []*Allocation{alloc("a", 7, 1, 0, "gX")}, ""},
		{"discrete: shares not host memory", false, []*Allocation{alloc("a", 0, 60*1024, 40960, "g0")}, ""},
		{"unified: shares charged to host memory", true, []*Allocation{alloc("a", 0, 8*1024, 40*1024, "g0")}, ""},
		{"unified: OS reserve kept", true, []*Allocation{alloc("a", 0, 8*1024+1, 40*1024, "g0")}, "memory: 49153 MiB needed, 49152 MiB available"},
		{"terminal allocs free everything", false, []*Allocation{alloc("a", 0, 1, 0, "g0"), {ID: "b", ClientStatus: AllocClientStatusComplete,
			AllocatedResources: alloc("b", 0, 1, 0, "g0").AllocatedResources}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := AllocsFit(node(tc.unified), tc.allocs)
			if (tc.want == "") != ok || !strings.Contains(reason, tc.want) {
				t.Fatalf("AllocsFit = %v %q, want %q", ok, reason, tc.want)
			}
		})
	}
}
