package devices

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestMIGSlicesAreTheInstances is the bug class "a node with 1 MIG-enabled
// GPU and 2 slices offers exactly 2 instances": the parent is not
// schedulable, each slice is an instance, and slices of one profile form
// one group with the slice's memory.
func TestMIGSlicesAreTheInstances(t *testing.T) {
	cases := []struct {
		name          string
		gpus          []GPU
		wantInstances int
		wantGroups    int
	}{
		{"one mig gpu, 2 slices", SimulatedMIG("node-1234", 0, "3g.40gb", 40192, 2), 2, 1},
		{"one mig gpu, 7 slices", SimulatedMIG("node-1234", 0, "1g.10gb", 9856, 7), 7, 1},
		{"mig gpu next to a plain gpu", append(SimulatedMIG("node-1234", 0, "3g.40gb", 40192, 2),
			GPU{UUID: "GPU-plain", Name: SimulatedName, MemoryMiB: SimulatedMemoryMiB}), 3, 2},
		{"mig on, no slices made yet", SimulatedMIG("node-1234", 0, "3g.40gb", 40192, 1)[:1], 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups := Group(tc.gpus)
			n := 0
			for _, g := range groups {
				for _, in := range g.Instances {
					n++
					if in.ID == "GPU-sim-node-123-mig0" {
						t.Fatalf("the MIG-enabled parent %s is schedulable", in.ID)
					}
				}
			}
			if n != tc.wantInstances || len(groups) != tc.wantGroups {
				t.Fatalf("%d instances in %d groups, want %d in %d", n, len(groups), tc.wantInstances, tc.wantGroups)
			}
			for _, g := range groups {
				if g.Attributes["mig"] != nil && g.MemoryMiB() >= SimulatedMemoryMiB {
					t.Fatalf("MIG group %s has the parent's memory %d MiB", g.Name, g.MemoryMiB())
				}
			}
		})
	}
}

func TestAppleGroup(t *testing.T) {
	cases := []struct {
		chip    string
		hostMiB int64
		wantMiB int64
		name    string
	}{
		{"Apple M2 Max", 64 * 1024, 48 * 1024, "Apple M2 Max"},
		{"", 16 * 1024, 12 * 1024, AppleGPUName},
		{"Apple M1", 8 * 1024, 4 * 1024, "Apple M1"},
	}
	for _, tc := range cases {
		g := AppleGroup(tc.chip, tc.hostMiB)
		if g == nil || g.Name != tc.name || g.MemoryMiB() != tc.wantMiB || len(g.Instances) != 1 || g.Vendor != structs.DeviceVendorApple {
			t.Fatalf("AppleGroup(%q, %d) = %+v, want %s with %d MiB", tc.chip, tc.hostMiB, g, tc.name, tc.wantMiB)
		}
		if mm := g.Attributes["memory_model"]; mm == nil || mm.Text() != structs.MemoryModelUnified {
			t.Fatalf("memory_model %v", mm)
		}
	}
	if AppleGroup("Apple M1", 0) != nil {
		t.Fatal("AppleGroup with no memory is not nil")
	}
}
