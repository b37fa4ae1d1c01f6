package server_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestResolveToken covers the resolver: anonymous with and without the
// anonymous policy, management, client tokens whose policy changes (the
// cache follows the ACL tables' index), unknown, deleted and expired
// tokens, and a second bootstrap refused.
func TestResolveToken(t *testing.T) {
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	s := c.Server(0)
	ctx := context.Background()

	acl, tok, err := s.ResolveToken("")
	if err != nil || acl != structs.DenyAllACL || tok.AccessorID != "anonymous" {
		t.Fatalf("anonymous before any policy: %v %v %v", acl, tok, err)
	}
	mgmt, err := s.ACLBootstrap(ctx)
	if err != nil || mgmt.SecretID == "" || mgmt.Type != structs.ACLTokenTypeManagement {
		t.Fatalf("bootstrap: %+v %v", mgmt, err)
	}
	if _, err := s.ACLBootstrap(ctx); !errors.Is(err, structs.ErrACLBootstrapped) {
		t.Fatalf("second bootstrap: %v", err)
	}
	if acl, _, err := s.ResolveToken(mgmt.SecretID); err != nil || !acl.IsManagement() {
		t.Fatalf("management token: %v %v", acl, err)
	}
	if _, err := s.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: "p", Rules: `namespace "default" { policy = "read" }`}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: "bad", Rules: `namespace {`}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("a policy that does not parse was stored: %v", err)
	}
	if _, err := s.ACLTokenUpsert(ctx, &structs.ACLToken{Type: structs.ACLTokenTypeClient, Policies: []string{"missing"}}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("token with a missing policy: %v", err)
	}
	ct, err := s.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "c", Type: structs.ACLTokenTypeClient, Policies: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	acl, _, err = s.ResolveToken(ct.SecretID)
	if err != nil || !acl.AllowNamespaceOp("default", structs.NamespaceCapabilityReadJob) || acl.AllowNamespaceOp("default", structs.NamespaceCapabilitySubmitJob) {
		t.Fatalf("client token: %v", err)
	}
	// The policy changes: the cached ACL is rebuilt.
	if _, err := s.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: "p", Rules: `namespace "default" { policy = "write" }`}); err != nil {
		t.Fatal(err)
	}
	if acl, _, _ = s.ResolveToken(ct.SecretID); !acl.AllowNamespaceOp("default", structs.NamespaceCapabilitySubmitJob) {
		t.Fatal("a changed policy did not reach the resolved token")
	}
	if _, err := s.ACLTokenDelete(ctx, ct.AccessorID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResolveToken(ct.SecretID); !errors.Is(err, structs.ErrACLTokenNotFound) || !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("deleted token: %v", err)
	}
	if _, _, err := s.ResolveToken("not-a-token"); !errors.Is(err, structs.ErrACLTokenNotFound) {
		t.Fatalf("unknown secret: %v", err)
	}
	short, err := s.ACLTokenUpsert(ctx, &structs.ACLToken{Type: structs.ACLTokenTypeClient, Policies: []string{"p"}, ExpirationTTL: 300 * time.Millisecond})
	if err != nil || short.ExpirationTime == nil {
		t.Fatalf("token with TTL: %+v %v", short, err)
	}
	if _, _, err := s.ResolveToken(short.SecretID); err != nil {
		t.Fatalf("fresh token with TTL: %v", err)
	}
	time.Sleep(350 * time.Millisecond) // the token's own expiry, not a wait for the system
	if _, _, err := s.ResolveToken(short.SecretID); !errors.Is(err, structs.ErrACLTokenExpired) {
		t.Fatalf("expired token (cached before): %v", err)
	}
	// The anonymous policy applies to requests without a token.
	if _, err := s.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: structs.AnonymousPolicyName, Rules: `node { policy = "read" }`}); err != nil {
		t.Fatal(err)
	}
	if acl, _, _ := s.ResolveToken(""); !acl.AllowNodeRead() || acl.AllowNodeWrite() {
		t.Fatal("anonymous policy not applied")
	}
	for _, bad := range []*structs.ACLToken{
		{Type: "root"},
		{Type: structs.ACLTokenTypeClient},
		{Type: structs.ACLTokenTypeManagement, Policies: []string{"p"}},
		{Type: structs.ACLTokenTypeClient, Policies: []string{"p"}, ExpirationTTL: -time.Second},
		{Type: structs.ACLTokenTypeClient, Policies: []string{"p"}, ExpirationTTL: 20 * 365 * 24 * time.Hour},
	} {
		if _, err := s.ACLTokenUpsert(ctx, bad); !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("token %+v accepted: %v", bad, err)
		}
	}
}

// TestACLSurvivesSnapshotRestore: policies, tokens and the bootstrap
// record are in snapshots, so a restored server still refuses a second
// bootstrap and knows the tokens.
func TestACLSurvivesSnapshotRestore(t *testing.T) {
	c := servertest.NewCluster(t, 1, servertest.WithConfig(func(cfg *server.Config) { cfg.RaftSnapshotThreshold = 1 }))
	c.WaitForLeader()
	s := c.Server(0)
	ctx := context.Background()
	mgmt, err := s.ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: "p", Rules: `node { policy = "read" }`}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.SnapshotSave(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ACLPolicyDelete(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := s.SnapshotRestore(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ACLPolicyGet(ctx, "p", nil); err != nil {
		t.Fatalf("policy after restore: %v", err)
	}
	if acl, _, err := s.ResolveToken(mgmt.SecretID); err != nil || !acl.IsManagement() {
		t.Fatalf("management token after restore: %v", err)
	}
	if _, err := s.ACLBootstrap(ctx); !errors.Is(err, structs.ErrACLBootstrapped) {
		t.Fatalf("bootstrap after restore: %v", err)
	}
}
