package agent

import (
	"strings"
	"testing"
)

// TestParseConfigDynamicPorts reads client { min_dynamic_port
// max_dynamic_port } and refuses a range out of bounds or upside down,
// naming the field.
func TestParseConfigDynamicPorts(t *testing.T) {
	parse := func(body string) error {
		t.Helper()
		f, err := ParseConfig("agent.hcl", []byte("client {\n  enabled = true\n  servers = [\"10.0.0.2:4656\"]\n"+body+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.Merge(f)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil && (strings.Contains(body, "21000") && cfg.Client.MinDynamicPort != 21000) {
			t.Fatalf("min_dynamic_port not merged: %d", cfg.Client.MinDynamicPort)
		}
		return err
	}
	if err := parse("  min_dynamic_port = 21000\n  max_dynamic_port = 21999\n  reserved_ports = \"22, 8000-8080\"\n"); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		"  min_dynamic_port = 80\n":                                "client.min_dynamic_port: must be 0",
		"  max_dynamic_port = 70000\n":                             "client.max_dynamic_port: must be 0",
		"  min_dynamic_port = 30000\n  max_dynamic_port = 25000\n": "must not be above client.max_dynamic_port",
		"  min_dynamic_port = 40000\n":                             "(40000) must not be above client.max_dynamic_port (32000)",
	} {
		if err := parse(body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
