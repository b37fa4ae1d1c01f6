package jobspec

import (
	"strings"
	"testing"
)

// TestParseJobNodePool reads Nomad's top-level node_pool.
func TestParseJobNodePool(t *testing.T) {
	src := `job "train" {
  node_pool = "gpu-a100"
  group "g" {
    task "t" {
      driver = "native"
    }
  }
}
`
	job, err := Parse("train.hcl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.NodePool != "gpu-a100" {
		t.Fatalf("NodePool = %q", job.NodePool)
	}
	bad := strings.Replace(src, `"gpu-a100"`, `["x"]`, 1)
	if _, err := Parse("train.hcl", []byte(bad), nil); err == nil || !strings.Contains(err.Error(), "train.hcl:2") {
		t.Fatalf("node_pool list: %v, want an error at train.hcl:2", err)
	}
}
