package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestParseACLPolicy(t *testing.T) {
	p, err := ParseACLPolicy(`
namespace "default" {
  policy       = "read"
  capabilities = ["alloc-exec", "read-logs"]
}
namespace "dev-*" { policy = "write" }
node     { policy = "list" }
agent    { policy = "write" }
operator { policy = "deny" }
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Namespaces) != 2 || p.Namespaces[0].Name != "default" || p.Namespaces[1].Name != "dev-*" {
		t.Fatalf("namespaces %+v", p.Namespaces)
	}
	if got := strings.Join(p.Namespaces[0].Capabilities, ","); got != "alloc-exec,read-logs" {
		t.Errorf("capabilities %q", got)
	}
	if p.Node != "read" || p.Agent != "write" || p.Operator != "deny" {
		t.Errorf("levels node=%q agent=%q operator=%q", p.Node, p.Agent, p.Operator)
	}
}

func TestParseACLPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`namespace "a" { policy = "rwx" }`, `line 1, column 26: namespace "a": policy "rwx"`},
		{"\n\nnamespace \"a\" { capabilities = [\"fly\"] }", `line 3, column 32: namespace "a": unknown capability "fly"`},
		{`namespace { policy = "read" }`, "needs one label"},
		{`namespace "a" {}`, "needs policy or capabilities"},
		{`namespace "a" { policy = "read" }` + "\n" + `namespace "a" { policy = "write" }`, `line 2, column 1: namespace "a" given twice`},
		{`node { policy = "scale" }`, `node: policy "scale": want deny, read or write`},
		{`node {}`, "node: policy is required"},
		{`quota { policy = "read" }`, `unknown block "quota"`},
		{`policy = "read"`, "unexpected attribute"},
		{`namespace "a b" { policy = "read" }`, "only letters"},
		{`node { policy = 3 }`, "policy must be a string"},
		{`namespace "a" { policy = "read" `, "line 1"},
		{strings.Repeat("[", 40), "nesting deeper than 16"},
		{strings.Repeat(" ", structs.MaxACLPolicyRulesBytes+1), "bytes, at most"},
		{`node { policy = "read" }` + "\n" + `node { policy = "write" }`, "node block given twice"},
		{"namespace \"a\" {\n policy = \"read\"\n other = 1\n}", `line 3, column 2: namespace "a": unknown attribute "other"`},
		{"namespace \"a\" {\n policy = \"read\"\n variables {\n }\n}", `unsupported block "variables"`},
	} {
		_, err := ParseACLPolicy(tc.src)
		if err == nil || !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseACLPolicy(%.40q) = %v, want ErrInvalid with %q", tc.src, err, tc.want)
		}
	}
	var many strings.Builder
	for i := 0; i <= structs.MaxACLPolicyRules; i++ {
		many.WriteString("namespace \"n" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + itoa(i) + "\" { policy = \"read\" }\n")
	}
	if _, err := ParseACLPolicy(many.String()); err == nil || !strings.Contains(err.Error(), "more than 256 namespace rules") {
		t.Errorf("too many rules: %v", err)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// FuzzParseACLPolicy checks that no input makes the policy parser panic
// or hang, and that what it accepts compiles and answers checks.
func FuzzParseACLPolicy(f *testing.F) {
	for _, s := range []string{
		`namespace "default" { policy = "read" capabilities = ["alloc-exec"] }`,
		`namespace "*" { policy = "deny" }` + "\nnode { policy = \"write\" }",
		`agent { policy = "read" } operator { policy = "write" }`,
		`namespace "a*b*" { capabilities = ["submit-job", "read-logs"] }`,
		`node { policy = "${x}" }`, `namespace "a" { policy = ["read"] }`, "{{{{[[[(", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := ParseACLPolicy(src)
		if err != nil {
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		acl := structs.NewACL([]*structs.ACLPolicyRules{p})
		for _, ns := range []string{"default", "a", "ab", "prod"} {
			acl.AllowNamespaceOp(ns, structs.NamespaceCapabilitySubmitJob)
		}
		_ = acl.AllowNodeWrite() || acl.AllowAgentRead() || acl.AllowOperatorWrite()
	})
}
