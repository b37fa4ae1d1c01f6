package http

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestOptionalInterfacesAsserted finds every type assertion on the handler's
// server or client (h.srv.(X), srv.(X), h.client.(X), client.(X)) in the
// package's non-test files and fails when X has no compile-time assertion
// against *server.Server (a var line in ifaces.go) or *client.Client
// (embedded in FullClient, asserted in package agent): without one,
// renaming a method drops the route in silence.
func TestOptionalInterfacesAsserted(t *testing.T) {
	asserted := func(file string) map[string]bool {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && len(vs.Names) == 1 && vs.Names[0].Name == "_" {
					out[id.Name] = true
				}
			}
		}
		return out
	}
	embedded := func(file, iface string) map[string]bool {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != iface {
				return true
			}
			for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
				if id, ok := m.Type.(*ast.Ident); ok && len(m.Names) == 0 {
					out[id.Name] = true
				}
			}
			return false
		})
		return out
	}
	want := map[string]map[string]bool{
		"srv":    asserted("ifaces.go"),
		"client": embedded("ifaces.go", "FullClient"),
	}
	if len(want["client"]) < 5 {
		t.Fatalf("FullClient embeds only %v; the scan is broken", want["client"])
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ta, ok := n.(*ast.TypeAssertExpr)
			if !ok || ta.Type == nil {
				return true
			}
			var holder string
			switch x := ta.X.(type) {
			case *ast.SelectorExpr:
				holder = x.Sel.Name
			case *ast.Ident:
				holder = x.Name
			}
			if holder == "Server" {
				holder = "srv" // cfg.Server.(TokenResolver)
			}
			set, ok := want[holder]
			if !ok {
				return true
			}
			id, ok := ta.Type.(*ast.Ident)
			if !ok {
				return true
			}
			found++
			if !set[id.Name] {
				missing = append(missing, name+": "+holder+".("+id.Name+")")
			}
			return true
		})
	}
	if found < 20 {
		t.Fatalf("found only %d assertions on the server or client; the scan is broken", found)
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s has no compile-time assertion against the real implementation", m)
	}
}
