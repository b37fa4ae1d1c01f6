package agent

import (
	"strings"
	"testing"
)

// TestParseConfigOutputs reads client { outputs { max_files max_bytes } }
// and refuses values out of range, naming the field.
func TestParseConfigOutputs(t *testing.T) {
	src := `
client {
  enabled = true
  servers = ["10.0.0.2:4656"]
  outputs {
    max_files = 20
    max_bytes = 1048576
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
	if f, b := cfg.Client.outputLimits(); f != 20 || b != 1<<20 {
		t.Fatalf("limits %d %d", f, b)
	}
	bad, err := ParseConfig("agent.hcl", []byte("client {\n  enabled = true\n  servers = [\"10.0.0.2:4656\"]\n  outputs {\n    max_files = -1\n  }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = DefaultConfig()
	cfg.Merge(bad)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "client.outputs.max_files") {
		t.Fatalf("negative max_files: %v", err)
	}
}
