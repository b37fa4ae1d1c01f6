package agent

import (
	"strings"
	"testing"
)

func TestACLConfig(t *testing.T) {
	if !DefaultConfig().ACLEnabled() {
		t.Error("ACLs off by default outside dev mode")
	}
	if DevConfig().ACLEnabled() {
		t.Error("ACLs on by default in dev mode")
	}
	fc, err := ParseConfig("a.hcl", []byte("acl {\n  enabled = false\n  token = \"join-secret\"\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Server.Enabled = true
	c.Merge(fc)
	if c.ACLEnabled() || c.ACLToken() != "join-secret" {
		t.Errorf("merged acl block: enabled %v token %q", c.ACLEnabled(), c.ACLToken())
	}
	dev := DevConfig()
	on, err := ParseConfig("b.hcl", []byte("acl {\n  enabled = true\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dev.Merge(on)
	if !dev.ACLEnabled() {
		t.Error("acl { enabled = true } did not turn ACLs on in dev mode")
	}
	if _, err := ParseConfig("c.hcl", []byte("acl {\n  enabled = \"maybe\"\n}\n")); err == nil || !strings.Contains(err.Error(), "c.hcl:2") {
		t.Errorf("bad acl.enabled: %v", err)
	}
	c.ACL.Token = strings.Repeat("x", 300)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "acl.token") {
		t.Errorf("long acl.token: %v", err)
	}
}
