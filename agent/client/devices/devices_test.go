package devices

import (
	"errors"
	"testing"
)

func TestSimulated(t *testing.T) {
	cases := []struct {
		name string
		n    int
		ids  []string
	}{
		{"none", 0, nil},
		{"negative", -1, nil},
		{"two", 2, []string{"GPU-sim-0d6e3b1c-0", "GPU-sim-0d6e3b1c-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := Simulated("0d6e3b1c-7a2f-4e8a-9c51-2f1f0f3b8d11", tc.n)
			if tc.ids == nil {
				if g != nil {
					t.Fatalf("got %+v, want nil", g)
				}
				return
			}
			if g.Vendor != "nvidia" || g.Type != "gpu" || g.Name != SimulatedName {
				t.Fatalf("group id %s", g.ID())
			}
			if len(g.Instances) != len(tc.ids) {
				t.Fatalf("%d instances, want %d", len(g.Instances), len(tc.ids))
			}
			for i, in := range g.Instances {
				if in.ID != tc.ids[i] || !in.Healthy {
					t.Errorf("instance %d = %+v, want healthy %s", i, in, tc.ids[i])
				}
			}
			if a := g.Attributes["simulated"]; a == nil || a.Bool == nil || !*a.Bool {
				t.Errorf("simulated attribute = %v", a)
			}
			if a := g.Attributes["memory"]; a.Int == nil || *a.Int != SimulatedMemoryMiB || a.Unit != "MiB" {
				t.Errorf("memory attribute = %s", a.Text())
			}
			if a := g.Attributes["compute_capability"]; a.Text() != "9.0" {
				t.Errorf("compute_capability = %s", a.Text())
			}
			// Stable: the same node ID gives the same IDs.
			again := Simulated("0d6e3b1c-7a2f-4e8a-9c51-2f1f0f3b8d11", tc.n)
			for i := range again.Instances {
				if again.Instances[i].ID != g.Instances[i].ID {
					t.Errorf("instance IDs not stable")
				}
			}
		})
	}
}

func TestGroup(t *testing.T) {
	h100 := func(uuid, bus string) GPU {
		return GPU{UUID: uuid, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, ComputeCapability: "9.0", PCIBusID: bus, DriverVersion: "550.54", CUDAVersion: "12.4"}
	}
	a100 := GPU{UUID: "GPU-a", Name: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, ComputeCapability: "8.0", PCIBusID: "00000000:01:00.0", DriverVersion: "550.54", CUDAVersion: "12.4"}
	cases := []struct {
		name   string
		in     []GPU
		groups map[string][]string // group name -> instance IDs in order
	}{
		{"empty", nil, map[string][]string{}},
		{"identical grouped, ordered by bus", []GPU{h100("GPU-2", "00000000:3B:00.0"), h100("GPU-1", "00000000:1B:00.0")},
			map[string][]string{"NVIDIA H100 80GB HBM3": {"GPU-1", "GPU-2"}}},
		{"two models", []GPU{h100("GPU-1", "00000000:1B:00.0"), a100, h100("GPU-2", "00000000:3B:00.0")},
			map[string][]string{"NVIDIA H100 80GB HBM3": {"GPU-1", "GPU-2"}, "NVIDIA A100-SXM4-40GB": {"GPU-a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Group(tc.in)
			if len(got) != len(tc.groups) {
				t.Fatalf("%d groups, want %d", len(got), len(tc.groups))
			}
			for _, g := range got {
				want, ok := tc.groups[g.Name]
				if !ok {
					t.Fatalf("unexpected group %q", g.Name)
				}
				if len(g.Instances) != len(want) {
					t.Fatalf("group %q: %d instances, want %d", g.Name, len(g.Instances), len(want))
				}
				for i, in := range g.Instances {
					if in.ID != want[i] {
						t.Errorf("group %q instance %d = %s, want %s", g.Name, i, in.ID, want[i])
					}
				}
				if g.Attributes["memory"].Unit != "MiB" || g.Attributes["cuda_version"].Text() != "12.4" {
					t.Errorf("group %q attributes %v", g.Name, g.Attributes)
				}
			}
		})
	}
}

// TestDetectWithoutGPU runs where no NVIDIA driver is installed (CI, this
// project's build hosts): Detect must fail cleanly with ErrUnavailable.
// On a host with a GPU it checks the groups instead.
func TestDetectWithoutGPU(t *testing.T) {
	groups, err := Detect()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Detect error %v does not wrap ErrUnavailable", err)
		}
		return
	}
	for _, g := range groups {
		if g.Vendor != "nvidia" || len(g.Instances) == 0 {
			t.Errorf("bad group %+v", g)
		}
	}
}
