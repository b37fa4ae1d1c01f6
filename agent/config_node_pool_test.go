package agent

import (
	"strings"
	"testing"
)

// TestParseConfigNodePool reads client { node_pool } and refuses a
// malformed name or "all" (which cannot have nodes), naming the field.
func TestParseConfigNodePool(t *testing.T) {
	parse := func(body string) (*Config, error) {
		t.Helper()
		f, err := ParseConfig("agent.hcl", []byte("client {\n  enabled = true\n  servers = [\"10.0.0.2:4656\"]\n"+body+"}\n"))
		if err != nil {
			return nil, err
		}
		cfg := DefaultConfig()
		cfg.Merge(f)
		return cfg, cfg.Validate()
	}
	cfg, err := parse("  node_pool = \"gpu-a100\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Client.NodePool != "gpu-a100" {
		t.Fatalf("node_pool = %q", cfg.Client.NodePool)
	}
	if cfg, err := parse(""); err != nil || cfg.Client.NodePool != "" {
		t.Fatalf("no node_pool: %q, %v", cfg.Client.NodePool, err)
	}
	for body, want := range map[string]string{
		"  node_pool = \"all\"\n":                              `client.node_pool "all"`,
		"  node_pool = \"a b\"\n":                              `client.node_pool "a b"`,
		"  node_pool = \"" + strings.Repeat("p", 129) + "\"\n": "client.node_pool",
		"  node_pool = [\"x\"]\n":                              "agent.hcl:4",
	} {
		_, err := parse(body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", body, err, want)
		}
	}
}
