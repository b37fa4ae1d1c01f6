package http

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestExploitJobInputDigestIsNotACapability: a job may name an
// artifact://sha256/<hex> input only when its submitter may read that
// artifact; otherwise knowing a digest would get its bytes into a task
// the submitter controls. An allowed job is recorded as a reference, so
// its nodes may fetch the input and retention keeps it.
func TestExploitJobInputDigestIsNotACapability(t *testing.T) {
	f := newACLFixture(t)
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	ctx := context.Background()
	other, err := f.srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "other-writer", Type: structs.ACLTokenTypeClient, Policies: []string{"nswrite"}})
	if err != nil {
		t.Fatal(err)
	}
	data, d := randomBytes(t, 4000)
	if code, body, _ := send(t, "PUT", ts.URL+"/v1/artifact/sha256/"+d, data, map[string]string{HeaderNomadToken: f.writeTok.SecretID}); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	job := func(id, digest string) []byte {
		b, _ := json.Marshal(map[string]interface{}{"Job": map[string]interface{}{
			"ID": id, "Name": id, "Type": "batch",
			"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1,
				"Tasks": []interface{}{map[string]interface{}{"Name": "t", "Driver": "native",
					"Config":    map[string]interface{}{"command": "/bin/true"},
					"Resources": map[string]interface{}{"CPU": 10, "MemoryMB": 8},
					"Artifacts": []interface{}{map[string]interface{}{"GetterSource": structs.ArtifactRefPrefix + digest, "RelativeDest": "local/in", "GetterMode": "file"}},
				}}}},
		}})
		return b
	}
	// Another writer of the namespace knows the digest but may not read it.
	if code, body, _ := send(t, "PUT", ts.URL+"/v1/jobs", job("thief", d), map[string]string{HeaderNomadToken: other.SecretID}); code != 403 {
		t.Fatalf("a job naming an input its submitter may not read: %d %s, want 403", code, body)
	}
	if j, _, _ := f.srv.JobGet(ctx, "thief", nil); j != nil {
		t.Fatal("the refused job was registered")
	}
	// An unknown digest is a 400 naming it.
	unknown := "0000000000000000000000000000000000000000000000000000000000000000"
	if code, body, _ := send(t, "PUT", ts.URL+"/v1/jobs", job("ghost", unknown), map[string]string{HeaderNomadToken: f.writeTok.SecretID}); code != 400 {
		t.Fatalf("a job naming an unknown input: %d %s, want 400", code, body)
	}
	// The uploader's job is registered and recorded as a reference.
	if code, body, _ := send(t, "PUT", ts.URL+"/v1/jobs", job("owner", d), map[string]string{HeaderNomadToken: f.writeTok.SecretID}); code != 200 {
		t.Fatalf("the uploader's job: %d %s", code, body)
	}
	a, _, err := f.srv.ArtifactGet(ctx, d, nil)
	if err != nil || a == nil || !slices.Contains(a.JobRefs, "default/owner") {
		t.Fatalf("artifact after the job: %+v, %v; want JobRefs with default/owner", a, err)
	}
}
