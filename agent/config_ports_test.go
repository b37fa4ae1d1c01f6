package agent

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
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

// TestClientReservesAgentPorts: the ports the agent listens on are
// reserved on its node, so no job's static port (or dynamic pick inside a
// range that holds them) lands on the agent's own http, raft or serf port.
// Before, `port "x" { static = 4656 }` was placed on the node whose agent
// held 4656 and the task could not bind.
func TestClientReservesAgentPorts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Server.Enabled = true
	cfg.Client.Enabled = true
	cfg.Client.ReservedPorts = "22"
	got, err := structs.ParsePortRanges(cfg.clientReservedPorts())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{22, cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf} {
		if !slices.Contains(got, want) {
			t.Errorf("reserved ports %v lack %d", got, want)
		}
	}
	cfg.Server.Enabled = false
	cfg.Client.ReservedPorts = ""
	if got := cfg.clientReservedPorts(); got != strconv.Itoa(cfg.Ports.HTTP) {
		t.Errorf("client-only agent reserves %q, want its http port %d", got, cfg.Ports.HTTP)
	}
}
