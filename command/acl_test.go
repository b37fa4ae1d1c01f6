package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestACLCommands runs the acl verbs against a real server agent with ACLs
// on (startServerAgent bootstraps through `acl bootstrap` and exports the
// management token in GPULAYER_TOKEN): policy apply, list, info, delete;
// token create, list, info, self, delete; -token overriding the
// environment; and a second bootstrap refused.
func TestACLCommands(t *testing.T) {
	addr := startServerAgent(t, "srv-acl")
	if r := runCmd(t, addr, "acl", "bootstrap"); r.code != 1 || !strings.Contains(r.err, "already done") {
		t.Errorf("second bootstrap: %d %s%s", r.code, r.out, r.err)
	}
	rules := filepath.Join(t.TempDir(), "readonly.hcl")
	if err := os.WriteFile(rules, []byte("namespace \"*\" {\n  policy = \"read\"\n}\nnode {\n  policy = \"read\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCmd(t, addr, "acl", "policy", "apply", "-description", "read all", "readonly", rules); r.code != 0 || !strings.Contains(r.out, `"readonly"`) {
		t.Fatalf("policy apply: %d %s%s", r.code, r.out, r.err)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	_ = os.WriteFile(bad, []byte("node {\n  policy = \"root\"\n}\n"), 0o600)
	if r := runCmd(t, addr, "acl", "policy", "apply", "bad", bad); r.code != 1 || !strings.Contains(r.err, "line 2") {
		t.Errorf("bad policy: %d %s", r.code, r.err)
	}
	if r := runCmd(t, addr, "acl", "policy", "list"); r.code != 0 || !strings.Contains(r.out, "readonly") || !strings.Contains(r.out, "read all") {
		t.Errorf("policy list: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, addr, "acl", "policy", "info", "readonly"); r.code != 0 || !strings.Contains(r.out, `policy = "read"`) {
		t.Errorf("policy info: %d %s%s", r.code, r.out, r.err)
	}
	r := runCmd(t, addr, "acl", "token", "create", "-name", "alice", "-policy", "readonly", "-ttl", "1h", "-json")
	var tok struct{ AccessorID, SecretID string }
	if r.code != 0 || json.Unmarshal([]byte(r.out), &tok) != nil || tok.SecretID == "" {
		t.Fatalf("token create: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, addr, "acl", "token", "list"); r.code != 0 || !strings.Contains(r.out, tok.AccessorID) || strings.Contains(r.out, tok.SecretID) {
		t.Errorf("token list: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, addr, "acl", "token", "info", tok.AccessorID); r.code != 0 || !strings.Contains(r.out, "alice") {
		t.Errorf("token info: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, addr, "acl", "token", "self", "-token", tok.SecretID); r.code != 0 || !strings.Contains(r.out, "alice") || !strings.Contains(r.out, "Expiry Time") {
		t.Errorf("token self with -token: %d %s%s", r.code, r.out, r.err)
	}
	// alice may read but not write policies or list tokens.
	if r := runCmd(t, addr, "acl", "token", "list", "-token", tok.SecretID); r.code != 1 || !strings.Contains(r.err, "403") {
		t.Errorf("token list as alice: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, addr, "acl", "token", "delete", tok.AccessorID); r.code != 0 {
		t.Errorf("token delete: %d %s", r.code, r.err)
	}
	if r := runCmd(t, addr, "acl", "token", "self", "-token", tok.SecretID); r.code != 1 || !strings.Contains(r.err, "ACL token not found") {
		t.Errorf("deleted token self: %d %s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, addr, "acl", "policy", "delete", "readonly"); r.code != 0 {
		t.Errorf("policy delete: %d %s", r.code, r.err)
	}
	t.Setenv("GPULAYER_TOKEN", "")
	if r := runCmd(t, addr, "acl", "policy", "list"); r.code != 1 || !strings.Contains(r.err, "403") {
		t.Errorf("policy list without a token: %d %s%s", r.code, r.out, r.err)
	}
}
