package main

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// importRules is ARCHITECTURE.md's package table: for each package (a
// prefix match on the path inside the module), the module packages it may
// import directly. Packages ending in "test" (statetest, servertest,
// clienttest) may import anything, as may _test.go files.
var importRules = []struct {
	pkg     string
	allowed []string
}{
	{"structs", nil},
	{"state", []string{"structs"}},
	{"server/fsm", []string{"structs", "state"}},
	{"server/scheduler", []string{"structs"}},
	{"server", []string{"server/fsm", "server/scheduler", "state", "structs"}},
	{"agent/http", []string{"server", "nomadish", "website", "structs"}},
	{"agent/client", []string{"agent/driver", "agent/client", "structs"}},
	{"agent/driver", []string{"agent/driver", "structs"}},
	{"agent", []string{"agent", "server", "state", "structs", "nomadish", "website"}},
	{"nomadish/api", nil},
	{"nomadish/jobspec", []string{"nomadish/api"}},
	{"nomadish/convert", []string{"nomadish/api", "structs"}},
	{"command", []string{"nomadish", "agent", "command"}},
	{"website", nil},
	{"", []string{"command"}}, // main
}

const modulePath = "github.com/gpulayer/gpulayer"

func under(rel, prefix string) bool {
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

// TestImportBoundaries fails when a package imports past its row of the
// table in ARCHITECTURE.md (`make check-imports` runs it).
func TestImportBoundaries(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Dir        string
			GoFiles    []string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		if strings.HasSuffix(rel, "test") {
			continue
		}
		var allowed []string
		found := false
		for _, r := range importRules {
			if under(rel, r.pkg) || r.pkg == "" && rel == "" {
				allowed, found = r.allowed, true
				break
			}
		}
		if !found {
			t.Errorf("package %q is not in ARCHITECTURE.md's table: add a row or move it", rel)
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			irel := strings.TrimPrefix(imp, modulePath+"/")
			ok := false
			for _, a := range allowed {
				if under(irel, a) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s, which its row in ARCHITECTURE.md does not allow", rel, irel)
			}
		}
		// command may import agent only from agent.go, and the crypto-only
		// agent/tlsutil (the test PKI) only from tls.go.
		if rel == "command" {
			for _, f := range p.GoFiles {
				if f == "agent.go" {
					continue
				}
				allow := ""
				if f == "tls.go" {
					allow = modulePath + "/agent/tlsutil"
				}
				checkNoImport(t, filepath.Join(p.Dir, f), modulePath+"/agent", allow)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages; go list output looks wrong", checked)
	}
}

// checkNoImport fails for an import of forbidden or a package under it,
// except allowed (empty: none).
func checkNoImport(t *testing.T, file, forbidden, allowed string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path != allowed && (path == forbidden || strings.HasPrefix(path, forbidden+"/")) {
			t.Errorf("%s imports %s: only command/agent.go may", file, path)
		}
	}
}
