package client

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

func TestApplyNodeClass(t *testing.T) {
	apple := devices.AppleGroup("Apple M2 Max", 64*1024)
	nvidia := devices.Simulated("node-1", 2)
	cases := []struct {
		name               string
		cfg                Config
		groups             []*structs.DeviceGroup
		model, avail, attr string
		reserved           []string
		err                string
	}{
		{"defaults", Config{}, []*structs.DeviceGroup{nvidia}, structs.MemoryModelDiscrete, structs.AvailabilityContinuous, "", nil, ""},
		{"unified detected", Config{}, []*structs.DeviceGroup{apple}, structs.MemoryModelUnified, structs.AvailabilityContinuous, "", nil, ""},
		{"declared class", Config{Availability: "opportunistic", Reserved: []string{"voice", "asr", "voice"}}, nil,
			structs.MemoryModelDiscrete, structs.AvailabilityOpportunistic, "asr,voice", []string{"asr", "voice"}, ""},
		{"model override", Config{MemoryModel: "unified"}, []*structs.DeviceGroup{nvidia}, structs.MemoryModelUnified, structs.AvailabilityContinuous, "", nil, ""},
		{"bad availability", Config{Availability: "weekends"}, nil, "", "", "", nil, `availability: must be "continuous" or "opportunistic", got "weekends"`},
		{"bad capability", Config{Reserved: []string{"two words"}}, nil, "", "", "", nil, `reserved 1: invalid capability name "two words"`},
		{"bad model", Config{MemoryModel: "shared"}, nil, "", "", "", nil, `memory_model`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			c := &Client{cfg: &cfg}
			n := &structs.Node{Attributes: map[string]string{}, NodeResources: &structs.NodeResources{Devices: tc.groups}}
			err := c.applyNodeClass(n)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.MemoryModel != tc.model || n.Availability != tc.avail || strings.Join(n.Reserved, ",") != strings.Join(tc.reserved, ",") {
				t.Fatalf("node class %q %q %v", n.MemoryModel, n.Availability, n.Reserved)
			}
			if n.Attributes["memory_model"] != tc.model || n.Attributes["availability"] != tc.avail || n.Attributes["reserved"] != tc.attr {
				t.Fatalf("attributes %v", n.Attributes)
			}
		})
	}
}
