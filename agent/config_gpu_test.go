package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

func TestParseConfigNodeClass(t *testing.T) {
	src := `
client {
  enabled      = true
  servers      = ["10.0.0.2:4656"]
  availability = "opportunistic"
  reserved     = ["voice"]
  memory_model = "discrete"
  simulated_gpu {
    count  = 2
    model  = "NVIDIA A100-SXM4-80GB"
    memory = 81920
    idle_utilization = 90
  }
  simulated_gpu {
    count       = 1
    mig_profile = "3g.40gb"
    mig_slices  = 2
    mig_memory  = 40192
  }
}
`
	fileCfg, err := ParseConfig("agent.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Merge(fileCfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Client.Availability != "opportunistic" || strings.Join(cfg.Client.Reserved, ",") != "voice" || len(cfg.Client.SimulatedGPUs) != 2 {
		t.Fatalf("client config %+v", cfg.Client)
	}
	groups := simulatedGroups("seed-0123456789", cfg.Client.SimulatedGPUs)
	var a100, mig *structs.DeviceGroup
	for _, g := range groups {
		if g.Attributes["mig"] != nil {
			mig = g
		} else {
			a100 = g
		}
		if s := g.Attributes["simulated"]; s == nil || s.Text() != "true" {
			t.Fatalf("group %s not marked simulated", g.Name)
		}
	}
	if a100 == nil || a100.Name != "NVIDIA A100-SXM4-80GB" || len(a100.Instances) != 2 || a100.MemoryMiB() != 81920 {
		t.Fatalf("A100 group %+v", a100)
	}
	if u := a100.Attributes[devices.AttrSimulatedIdleUtilization]; u == nil || u.Int == nil || *u.Int != 90 {
		t.Fatalf("A100 idle utilisation attribute %v, want 90", u)
	}
	if u := mig.Attributes[devices.AttrSimulatedIdleUtilization]; u != nil {
		t.Fatalf("MIG group without idle_utilization has %v", u)
	}
	// One MIG-enabled GPU with 2 slices offers exactly 2 instances.
	if mig == nil || len(mig.Instances) != 2 || mig.MemoryMiB() != 40192 || len(groups) != 2 {
		t.Fatalf("MIG group %+v (groups %d)", mig, len(groups))
	}
	again := simulatedGroups("seed-0123456789", cfg.Client.SimulatedGPUs)
	if again[0].Instances[0].ID != groups[0].Instances[0].ID {
		t.Fatal("simulated instance IDs are not stable for a seed")
	}
}

func TestParseConfigNodeClassErrors(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"availability", `availability = "weekends"`, `client.availability: must be "continuous" or "opportunistic", got "weekends"`},
		{"reserved", `reserved = ["a b"]`, `client.reserved 1: invalid capability name "a b"`},
		{"memory model", `memory_model = "shared"`, `client.memory_model`},
		{"gpu count", "simulated_gpu {\n    count = 0\n  }", "client.simulated_gpu 1: count: must be between 1 and 64, got 0"},
		{"idle utilisation", "simulated_gpu {\n    count = 1\n    idle_utilization = 101\n  }", "client.simulated_gpu 1: idle_utilization: must be between 0 and 100, got 101"},
		{"mig without profile", "simulated_gpu {\n    count = 1\n    mig_slices = 2\n  }", "client.simulated_gpu 1: mig_profile and mig_memory are required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fileCfg, err := ParseConfig("agent.hcl", []byte("client {\n  enabled = true\n  servers = [\"10.0.0.2:4656\"]\n  "+tc.body+"\n}\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Merge(fileCfg)
			err = cfg.Validate()
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseConfig("agent.hcl", []byte("client {\n  reserved = \"voice\"\n}\n")); err == nil || !strings.Contains(err.Error(), "agent.hcl:2:") {
		t.Fatalf("reserved as a string: %v", err)
	}
}

// TestDevDeclaredGPUsReplaceDefaults (issue 11 item 11) checks that in dev
// mode simulated_gpu blocks replace the two default simulated GPUs, while an
// explicit dev_gpus (or -dev-gpus) still counts.
func TestDevDeclaredGPUsReplaceDefaults(t *testing.T) {
	two := 2
	decl := []*SimulatedGPUConfig{{Count: 1, Model: "NVIDIA L4", Memory: 23034}}
	cases := []struct {
		name string
		cl   ClientConfig
		want int
	}{
		{"no declarations: client default", ClientConfig{}, -1},
		{"declarations replace the default", ClientConfig{SimulatedGPUs: decl}, 0},
		{"explicit dev_gpus with declarations", ClientConfig{SimulatedGPUs: decl, DevGPUs: &two}, 2},
		{"explicit dev_gpus alone", ClientConfig{DevGPUs: &two}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := devGPUCount(&tc.cl); got != tc.want {
				t.Fatalf("devGPUCount = %d, want %d", got, tc.want)
			}
		})
	}
	// The whole path: a dev agent's config with one declared GPU reports
	// exactly that GPU to the client.
	cfg := DevConfig()
	fileCfg, err := ParseConfig("dev.hcl", []byte("client {\n  simulated_gpu {\n    count = 1\n    model = \"NVIDIA L4\"\n  }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Merge(fileCfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := devGPUCount(cfg.Client); got != 0 {
		t.Fatalf("dev config with simulated_gpu: devGPUCount = %d, want 0 (no default GPUs)", got)
	}
}
