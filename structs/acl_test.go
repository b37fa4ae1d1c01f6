package structs

import (
	"testing"
	"time"
)

func TestACLMergeAndGlobs(t *testing.T) {
	acl := NewACL([]*ACLPolicyRules{
		{Namespaces: []*ACLNamespaceRule{
			{Name: "default", Policy: PolicyRead},
			{Name: "dev-*", Policy: PolicyWrite},
			{Name: "*", Policy: PolicyRead},
			{Name: "prod", Capabilities: []string{NamespaceCapabilityReadLogs}},
		}, Node: PolicyRead, Agent: PolicyWrite},
		{Namespaces: []*ACLNamespaceRule{
			{Name: "default", Capabilities: []string{NamespaceCapabilityAllocExec}},
			{Name: "dev-secret", Policy: PolicyDeny},
		}, Node: PolicyWrite, Agent: PolicyDeny, Operator: PolicyList},
	})
	for _, tc := range []struct {
		ns, op string
		want   bool
	}{
		{"default", NamespaceCapabilityReadJob, true},
		{"default", NamespaceCapabilityAllocExec, true}, // joined from the second policy
		{"default", NamespaceCapabilitySubmitJob, false},
		{"dev-a", NamespaceCapabilitySubmitJob, true}, // dev-* beats *
		{"dev-secret", NamespaceCapabilityReadJob, false},
		{"other", NamespaceCapabilityReadJob, true}, // *
		{"other", NamespaceCapabilitySubmitJob, false},
		{"prod", NamespaceCapabilityReadLogs, true}, // exact rule decides
		{"prod", NamespaceCapabilityReadJob, false},
	} {
		if got := acl.AllowNamespaceOp(tc.ns, tc.op); got != tc.want {
			t.Errorf("AllowNamespaceOp(%q, %q) = %v, want %v", tc.ns, tc.op, got, tc.want)
		}
	}
	if !acl.AllowNodeWrite() || acl.AllowAgentRead() || !acl.AllowOperatorRead() || acl.AllowOperatorWrite() || acl.IsManagement() {
		t.Errorf("levels: node write %v, agent read %v (deny wins), operator read %v write %v",
			acl.AllowNodeWrite(), acl.AllowAgentRead(), acl.AllowOperatorRead(), acl.AllowOperatorWrite())
	}
	if DenyAllACL.AllowNamespaceOp("default", NamespaceCapabilityReadJob) || DenyAllACL.AllowNodeRead() {
		t.Error("DenyAllACL allows something")
	}
	var nilACL *ACL
	if nilACL.AllowNamespaceOp("default", NamespaceCapabilityReadJob) || nilACL.AllowAgentRead() || nilACL.IsManagement() {
		t.Error("a nil ACL allows something")
	}
	if !ManagementACL.AllowNamespaceOp("x", NamespaceCapabilityAllocNodeExec) || !ManagementACL.AllowOperatorWrite() {
		t.Error("ManagementACL refuses something")
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, n string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abc", true}, {"a*c", "abd", false},
		{"*b*", "abc", true}, {"a**", "a", true}, {"abc", "abc", true}, {"ab", "abc", false}, {"a*b*c", "aXbYbZc", true},
	} {
		if got := globMatch(tc.p, tc.n); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.n, got)
		}
	}
}

func TestACLTokenStubAndExpiry(t *testing.T) {
	now := time.Now()
	past := now.Add(-time.Second)
	tok := &ACLToken{AccessorID: "a", SecretID: "s", Policies: []string{"p"}, ExpirationTime: &past}
	if !tok.IsExpired(now) {
		t.Error("token expired a second ago is not expired")
	}
	if tok.Redacted().SecretID != "" || tok.SecretID != "s" {
		t.Error("Redacted changed the original or kept the secret")
	}
	if ValidACLName("Name", "ok-name_1") != nil || ValidACLName("Name", "bad name") == nil || ValidACLName("Name", "") == nil {
		t.Error("ValidACLName")
	}
}
