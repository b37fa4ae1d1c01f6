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
// prefix match on the path inside the module, first match wins), the
// module packages it may import directly and, where the table names them,
// the third-party modules it may import (third; nil with anyThird false
// means the standard library only). Packages ending in "test" (statetest,
// servertest, clienttest) may import anything, as may _test.go files; no
// other package's non-test code may import a "*test" package.
var importRules = []struct {
	pkg     string
	allowed []string
	// third lists the third-party import path prefixes the package may
	// use; anyThird lets it use any (the table names none for its row).
	third    []string
	anyThird bool
}{
	// "stdlib + msgpack only".
	{pkg: "structs", third: []string{msgpackModule, "github.com/hashicorp/cronexpr"}},
	{pkg: "state", allowed: []string{"structs"}, third: []string{"github.com/hashicorp/go-memdb", msgpackModule}},
	{pkg: "server/fsm", allowed: []string{"structs", "state"}, third: []string{"github.com/hashicorp/go-hclog", "github.com/hashicorp/raft", msgpackModule}},
	// "Pure placement ... No I/O, no clocks": nothing beyond the
	// standard library.
	{pkg: "server/scheduler", allowed: []string{"structs"}},
	// The blob store (ARCHITECTURE.md "Where the next parts live":
	// artifacts): stdlib and structs.
	{pkg: "server/artifacts", allowed: []string{"structs"}},
	// The leader's deployment watcher (ARCHITECTURE.md "Where the next
	// parts live": deployments): decisions on a state snapshot, applied
	// through a Raft callback.
	{pkg: "server/deploymentwatcher", allowed: []string{"structs", "state"}, third: []string{"github.com/hashicorp/go-hclog", "github.com/hashicorp/go-memdb"}},
	// Provisioning (issue 16): the Provider interface and the providers
	// (server/provision/docker, server/provision/exec), which talk to the
	// Docker engine and run programs; no state or Raft.
	{pkg: "server/provision", allowed: []string{"server/provision", "state", "structs"}, anyThird: true},
	{pkg: "server", allowed: []string{"server/fsm", "server/scheduler", "server/artifacts", "server/deploymentwatcher", "state", "structs"}, anyThird: true},
	{pkg: "agent/http", allowed: []string{"server", "nomadish", "website", "structs"}, anyThird: true},
	{pkg: "agent/client", allowed: []string{"agent/driver", "agent/client", "structs"}, anyThird: true},
	{pkg: "agent/driver", allowed: []string{"agent/driver", "structs"}, anyThird: true},
	{pkg: "agent", allowed: []string{"agent", "server", "state", "structs", "nomadish", "website"}, anyThird: true},
	// "stdlib only".
	{pkg: "nomadish/api"},
	// The deterministic directory tar of artifacts: stdlib only.
	{pkg: "nomadish/artifacttar"},
	{pkg: "nomadish/jobspec", allowed: []string{"nomadish/api"}, third: []string{"github.com/hashicorp/hcl/v2", "github.com/zclconf/go-cty"}},
	{pkg: "nomadish/convert", allowed: []string{"nomadish/api", "structs"}},
	// "on hashicorp/cli ... thin: flags, nomadish/api, rendering": no
	// HCL (jobspec parses), go-hclog for the agent command, x/term to
	// tell a terminal.
	{pkg: "command", allowed: []string{"nomadish", "agent", "command"}, third: []string{"github.com/hashicorp/cli", "github.com/hashicorp/go-hclog", "golang.org/x/term"}},
	// "stdlib only".
	{pkg: "website"},
	{pkg: "", allowed: []string{"command"}}, // main
}

// msgpackModule is the msgpack codec structs, state and the FSM use.
const msgpackModule = "github.com/hashicorp/go-msgpack/v2"

// isStdlib reports whether an import path is the standard library's: its
// first element has no dot.
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// isTestHelper reports whether a module package path is a test helper
// ("state/statetest"): its last element ends in "test".
func isTestHelper(rel string) bool {
	return strings.HasSuffix(rel[strings.LastIndex(rel, "/")+1:], "test")
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
		if isTestHelper(rel) {
			continue
		}
		var allowed, third []string
		anyThird, found := false, false
		for _, r := range importRules {
			if under(rel, r.pkg) || r.pkg == "" && rel == "" {
				allowed, third, anyThird, found = r.allowed, r.third, r.anyThird, true
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
				if isStdlib(imp) || anyThird {
					continue
				}
				ok := false
				for _, tp := range third {
					if imp == tp || strings.HasPrefix(imp, tp+"/") {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s imports the third-party %s, which its row in ARCHITECTURE.md does not allow", rel, imp)
				}
				continue
			}
			irel := strings.TrimPrefix(imp, modulePath+"/")
			if isTestHelper(irel) {
				t.Errorf("%s imports the test helper %s outside a _test.go file", rel, irel)
				continue
			}
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
