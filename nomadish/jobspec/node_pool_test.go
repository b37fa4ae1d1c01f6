package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
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

// TestParseNodePoolGolden parses testdata/node_pools/gpu.hcl and compares the
// JSON with its golden file (refresh with -update).
func TestParseNodePoolGolden(t *testing.T) {
	const path, golden = "testdata/node_pools/gpu.hcl", "testdata/node_pools/gpu.golden.json"
	p, err := ParseNodePoolFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n%s", path, golden, got)
	}
	s := p.Scaling
	if p.Name != "gpu-a100" || p.Meta["team"] != "ml" || s == nil || s.Provider != "docker" || s.Max != 4 ||
		s.Cooldown != 30*time.Second || s.IdleAfter != 2*time.Minute || s.ProviderConfig["image"] != "gpulayer:dev" ||
		s.Shape.GPUMemoryMB != 81920 || s.Shape.GPUCount != 1 || !s.Idle.NoAllocations || s.Idle.GPUUtilBelowPercent != 5 ||
		s.Idle.GPUUtilFor != 10*time.Minute {
		t.Fatalf("parsed %+v %+v", p, s)
	}
}

// TestParseNodePoolErrors: bad input gets a diagnostic naming file, line
// and what is wrong.
func TestParseNodePoolErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"empty", ``, "pool.hcl:1:1: Missing node_pool block"},
		{"two pools", "node_pool \"a\" {}\nnode_pool \"b\" {}\n", "pool.hcl:2:1: Duplicate node_pool block"},
		{"no label", "node_pool {}\n", "pool.hcl:1:11: Missing name for node_pool"},
		{"unknown attribute", "node_pool \"a\" {\n  colour = \"red\"\n}\n", `pool.hcl:2:3: Unsupported argument`},
		{"unknown top block", "job \"a\" {}\n", "pool.hcl:1:1: Unsupported block type"},
		{"scheduler_config", "node_pool \"a\" {\n  scheduler_config {}\n}\n", "pool.hcl:2:3: Unsupported block type: scheduler_config is Nomad Enterprise's"},
		{"min not a number", "node_pool \"a\" {\n  scaling {\n    min = \"zero\"\n  }\n}\n", "pool.hcl:3:11: Incorrect attribute value type"},
		{"min fraction", "node_pool \"a\" {\n  scaling {\n    min = 1.5\n  }\n}\n", "pool.hcl:3:11"},
		{"bad duration", "node_pool \"a\" {\n  scaling {\n    cooldown = \"soon\"\n  }\n}\n", "pool.hcl:3:16"},
		{"two scaling", "node_pool \"a\" {\n  scaling {}\n  scaling {}\n}\n", "pool.hcl:3:3: Duplicate scaling block"},
		{"two shapes", "node_pool \"a\" {\n  scaling {\n    shape {}\n    shape {}\n  }\n}\n", "pool.hcl:4:5: Duplicate shape block"},
		{"variable", "node_pool \"a\" {\n  description = var.x\n}\n", "pool.hcl:2:17: Variables not allowed"},
		{"function", "node_pool \"a\" {\n  description = upper(\"x\")\n}\n", "pool.hcl:2:17: Function calls not allowed"},
		{"syntax", "node_pool \"a\" {\n  description = \n}\n", "pool.hcl:2:"},
		{"config list", "node_pool \"a\" {\n  scaling {\n    config = [\"x\"]\n  }\n}\n", "pool.hcl:3:14"},
		{"nesting", "node_pool \"a\" {\n  description = " + strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100) + "\n}\n", "pool.hcl:2:"},
		{"too large", "node_pool \"a\" {\n  description = \"" + strings.Repeat("x", MaxNodePoolSpecBytes) + "\"\n}\n", "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseNodePool("pool.hcl", []byte(c.src))
			if err == nil || p != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseNodePool = %+v, %v; want an error containing %q", p, err, c.want)
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %T is not *Error", err)
			}
		})
	}
}

// FuzzParseNodePool: no input panics or hangs the node pool parser.
func FuzzParseNodePool(f *testing.F) {
	seed, err := os.ReadFile("testdata/node_pools/gpu.hcl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("node_pool \"a\" {}\n"))
	f.Add([]byte("node_pool \"a\" {\n  scaling {\n    config = { a = \"b\" }\n  }\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := ParseNodePool("fuzz.hcl", src)
		if err != nil {
			if strings.Contains(err.Error(), internalErrorSummary) {
				t.Fatalf("parser panicked: %v", err)
			}
			return
		}
		if p == nil {
			t.Fatal("no pool and no error")
		}
	})
}
