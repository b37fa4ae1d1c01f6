package http

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestArtifactAccess: with ACLs on, no token may neither upload nor read
// (403); a namespace writer's upload is readable by it (the uploader) and
// by management, not by another token until a job it may read references
// the artifact; a node reads only with its secret and ?node=, and only an
// artifact an allocation of its references.
func TestArtifactAccess(t *testing.T) {
	f := newACLFixture(t)
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	data, d := randomBytes(t, 5000)
	url := ts.URL + "/v1/artifact/sha256/" + d
	tok := func(s string) map[string]string { return map[string]string{HeaderNomadToken: s} }

	if code, body, _ := send(t, "PUT", url, data, nil); code != 403 {
		t.Fatalf("upload without a token: %d %s", code, body)
	}
	if code, body, _ := send(t, "PUT", url, data, tok(f.readTok.SecretID)); code != 403 {
		t.Fatalf("upload with a read-only token: %d %s", code, body)
	}
	code, body, _ := send(t, "PUT", url, data, tok(f.writeTok.SecretID))
	if code != 200 || !strings.Contains(string(body), f.writeTok.AccessorID) {
		t.Fatalf("upload by the namespace writer: %d %s", code, body)
	}
	if code, _, _ := send(t, "GET", url, nil, nil); code != 403 {
		t.Fatalf("read without a token: %d", code)
	}
	for name, secret := range map[string]string{"uploader": f.writeTok.SecretID, "management": f.mgmt.SecretID} {
		if code, got, _ := send(t, "GET", url, nil, tok(secret)); code != 200 || string(got) != string(data) {
			t.Fatalf("read by the %s: %d", name, code)
		}
	}
	if code, _, _ := send(t, "GET", url, nil, tok(f.readTok.SecretID)); code != 403 {
		t.Fatalf("read by a token no referencing job lets read: %d", code)
	}
	if code, _, _ := send(t, "GET", url+"?node="+f.nodeA.ID, nil, map[string]string{structs.HeaderNodeSecret: f.nodeA.SecretID}); code != 403 {
		t.Fatalf("read by a node none of whose allocations references it: %d", code)
	}
	if code, _, _ := send(t, "GET", url+"?node="+f.nodeA.ID, nil, map[string]string{structs.HeaderNodeSecret: f.nodeB.SecretID}); code != 403 {
		t.Fatalf("read with another node's secret: %d", code)
	}
	// The uploader references it from a job (no bytes needed: it may read
	// it); now the job's reader may read it, and it is listed for them.
	if code, body, _ := send(t, "PUT", url+"?job="+f.jobID, nil, tok(f.writeTok.SecretID)); code != 200 {
		t.Fatalf("reference from a job: %d %s", code, body)
	}
	if code, got, _ := send(t, "GET", url, nil, tok(f.readTok.SecretID)); code != 200 || string(got) != string(data) {
		t.Fatalf("read by the referencing job's reader: %d", code)
	}
	if code, body, _ := send(t, "GET", ts.URL+"/v1/artifacts", nil, tok(f.readTok.SecretID)); code != 200 || !strings.Contains(string(body), d) {
		t.Fatalf("list for the job's reader: %d %s", code, body)
	}

	// A node uploads with its secret and ?node=: it may read its upload,
	// another node may not; a secret without ?node= or for another node
	// is refused; an ?alloc= reference must be one of its allocations.
	out, od := randomBytes(t, 3000)
	ourl := ts.URL + "/v1/artifact/sha256/" + od
	nodeHdr := func(n *structs.Node) map[string]string {
		return map[string]string{structs.HeaderNodeSecret: n.SecretID}
	}
	if code, _, _ := send(t, "PUT", ourl, out, nodeHdr(f.nodeA)); code != 403 {
		t.Fatalf("node upload without ?node=: %d", code)
	}
	if code, _, _ := send(t, "PUT", ourl+"?node="+f.nodeA.ID, out, nodeHdr(f.nodeB)); code != 403 {
		t.Fatalf("node upload with another node's secret: %d", code)
	}
	if code, _, _ := send(t, "PUT", ourl+"?node="+f.nodeA.ID+"&alloc="+structs.GenerateUUID(), out, nodeHdr(f.nodeA)); code != 404 {
		t.Fatalf("node upload referencing an unknown allocation: %d", code)
	}
	if code, body, _ := send(t, "PUT", ourl+"?node="+f.nodeA.ID, out, nodeHdr(f.nodeA)); code != 200 || !strings.Contains(string(body), "node:"+f.nodeA.ID) {
		t.Fatalf("node upload: %d %s", code, body)
	}
	if code, got, _ := send(t, "GET", ourl+"?node="+f.nodeA.ID, nil, nodeHdr(f.nodeA)); code != 200 || string(got) != string(out) {
		t.Fatalf("the uploading node reads its upload: %d", code)
	}
	if code, _, _ := send(t, "GET", ourl+"?node="+f.nodeB.ID, nil, nodeHdr(f.nodeB)); code != 403 {
		t.Fatalf("another node reads it: %d", code)
	}
}

// TestExploitArtifactDigestIsNotACapability: a token that may upload but
// not read a stored artifact cannot get at it by claiming its digest: a
// claim without the bytes is refused (400, "send its bytes"), the
// artifact stays unreadable to it and gains no reference; only a body
// that hashes to the digest (proof of possession) adds the reference.
// On main there was no artifact store at all; this pins the rule.
func TestExploitArtifactDigestIsNotACapability(t *testing.T) {
	f := newACLFixture(t)
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	ctx := context.Background()
	other, err := f.srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "other-writer", Type: structs.ACLTokenTypeClient, Policies: []string{"nswrite"}})
	if err != nil {
		t.Fatal(err)
	}
	data, d := randomBytes(t, 5000)
	url := ts.URL + "/v1/artifact/sha256/" + d
	if code, body, _ := send(t, "PUT", url, data, map[string]string{HeaderNomadToken: f.mgmt.SecretID}); code != 200 {
		t.Fatalf("management upload: %d %s", code, body)
	}
	hdr := map[string]string{HeaderNomadToken: other.SecretID}
	// A job of its own, to hang the stolen reference on.
	job := &structs.Job{ID: "thief", Name: "thief", Type: structs.JobTypeService, TaskGroups: []*structs.TaskGroup{{
		Name: "g", Tasks: []*structs.Task{{Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 10, MemoryMB: 8}}}}}}
	job.Canonicalize()
	if _, err := f.srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	code, body, _ := send(t, "PUT", url+"?job=thief", nil, hdr)
	if code != 400 || !strings.Contains(string(body), "send its bytes") {
		t.Fatalf("claim by digest alone: %d %s", code, body)
	}
	if code, _, _ := send(t, "PUT", url+"?job=thief", []byte("guess"), hdr); code != 400 {
		t.Fatalf("claim with other bytes: %d", code)
	}
	if code, _, _ := send(t, "GET", url, nil, hdr); code != 403 {
		t.Fatalf("read after the refused claims: %d", code)
	}
	if a, _ := f.srv.State().ArtifactByDigest(nil, d); a == nil || len(a.JobRefs) != 0 {
		t.Fatalf("refused claims changed the references: %+v", a)
	}
	if code, body, _ := send(t, "PUT", url+"?job=thief", data, hdr); code != 200 {
		t.Fatalf("claim with the bytes: %d %s", code, body)
	}
	if code, _, _ := send(t, "GET", url, nil, hdr); code != 200 {
		t.Fatalf("read after proving the bytes: %d", code)
	}
}
