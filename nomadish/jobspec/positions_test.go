package jobspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPositionsAnnotate maps the field paths a server names back to the
// file's lines, one and several problems, by name and by place.
func TestPositionsAnnotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.hcl")
	src := `job "j" {
  type = "batchh"
  constraint {
    attribute = "a"
  }
  group "g" {
    count = 1
    task "t" {
      driver = "dockr"
      resources {
        device "nvidia/gpu" {
          count = 0
        }
      }
    }
  }
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, pos, err := ParseFileWithPositions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ msg, want string }{
		{`invalid job: type: must be "batch" or "service", got "batchh"`, path + `:2:3: type: must be`},
		{"invalid job:\n  * group \"g\": task \"t\": driver: unknown driver \"dockr\"\n  * group \"g\": task \"t\": resources: device \"nvidia/gpu\": count: must be at least 1, got 0",
			path + ":9:7: group \"g\": task \"t\": driver: unknown driver \"dockr\"\n" + path + ":12:11: group \"g\": task \"t\": resources: device \"nvidia/gpu\": count: must be"},
		{`invalid job: constraint 1: operator: unknown`, path + `:3:3: constraint 1: operator`},
		{`invalid job: group 1: name: invalid name "g"`, path + `:6:9: group 1: name`},
		{`invalid job: group "g": task "t": kill_timeout: must not be negative`, path + `:8:5: group "g": task "t": kill_timeout`},
		{`invalid job: nothing the file has`, path + `:1:1: nothing the file has`},
	}
	for _, tc := range cases {
		got, ok := pos.Annotate(tc.msg)
		if !ok || !strings.Contains(got, tc.want) {
			t.Errorf("Annotate(%q) = %q, %v; want %q", tc.msg, got, ok, tc.want)
		}
	}
	if got, ok := pos.Annotate("no cluster leader"); ok || got != "no cluster leader" {
		t.Errorf("Annotate of another message = %q, %v", got, ok)
	}
	var none *Positions
	if _, ok := none.Annotate("invalid job: type: x"); ok {
		t.Error("nil Positions annotated")
	}
}

// TestParseVarFile reads strings as text and other values as HCL source,
// and names file:line:col for a bad file.
func TestParseVarFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "vars.hcl")
	if err := os.WriteFile(good, []byte("name = \"x\"\ncount = 3\nlist = [\"a\", \"b\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars, err := ParseVarFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if vars["name"] != "x" || vars["count"] != "3" || vars["list"] != `["a", "b"]` {
		t.Errorf("vars %q", vars)
	}
	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte("name = \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseVarFile(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":1:") {
		t.Errorf("bad var file: %v", err)
	}
	if _, err := ParseVarFile(filepath.Join(dir, "missing.hcl")); !os.IsNotExist(err) {
		t.Errorf("missing var file: %v", err)
	}
}
