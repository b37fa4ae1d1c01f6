package http

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestExploitDedupedOutputIsReferenced: an allocation's output whose
// bytes the servers already hold (another token uploaded them, so the
// client asked `missing`, skipped the upload and only recorded it) gets
// the allocation as a reference from the update that records it: the
// allocation's job reader may read it, and `system gc` keeps it while
// the allocation exists. An output whose digest the servers do not store
// is not listed. On main the record added no reference: 403 for the
// reader, and retention collected the artifact under the listed output.
func TestExploitDedupedOutputIsReferenced(t *testing.T) {
	f := newACLFixture(t)
	ctx := context.Background()
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	tok := func(s string) map[string]string { return map[string]string{HeaderNomadToken: s} }

	// The job's reader: read on the default namespace only.
	if _, err := f.srv.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: "default-read", Rules: anonymousPolicyRules}); err != nil {
		t.Fatal(err)
	}
	reader, err := f.srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "job reader", Type: structs.ACLTokenTypeClient, Policies: []string{"default-read"}})
	if err != nil {
		t.Fatal(err)
	}
	// Another token uploads the bytes first, with no reference.
	data, d := randomBytes(t, 4000)
	url := ts.URL + "/v1/artifact/sha256/" + d
	if code, body, _ := send(t, "PUT", url, data, tok(f.writeTok.SecretID)); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	// A job in default runs on a node; its allocation ends, writing the
	// same bytes, so the client only records the output.
	node := statetest.Node(0)
	if _, err := f.srv.NodeRegister(ctx, node); err != nil {
		t.Fatal(err)
	}
	job := statetest.Job()
	if _, err := f.srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	var alloc *structs.Allocation
	waittest.NoErr(t, 10*time.Second, "the job's allocation", func() (bool, error) {
		allocs, _, err := f.srv.JobAllocations(ctx, job.ID, nil)
		if len(allocs) > 0 {
			alloc = allocs[0]
		}
		return alloc != nil, err
	})
	unknown := strings.Repeat("0e", 32)
	err = f.srv.UpdateAllocs(ctx, []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning,
		Outputs: []*structs.ArtifactRef{{Path: "main/out.bin", Digest: d, Size: int64(len(data))}, {Path: "main/never-stored", Digest: unknown, Size: 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body, _ := send(t, "GET", url, nil, tok(reader.SecretID)); code != 200 || string(body) != string(data) {
		t.Fatalf("the allocation's job reader reads its output: %d", code)
	}
	got, _, err := f.srv.AllocGet(ctx, alloc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Outputs) != 1 || got.Outputs[0].Digest != d {
		t.Fatalf("recorded outputs %+v, want only the stored one", got.Outputs)
	}
	if _, err := f.srv.SystemGC(ctx); err != nil {
		t.Fatal(err)
	}
	if a, err := f.srv.State().ArtifactByDigest(nil, d); err != nil || a == nil {
		t.Fatalf("system gc collected an output its live allocation lists: %v %v", a, err)
	}
	if code, _, _ := send(t, "GET", url, nil, tok(reader.SecretID)); code != 200 {
		t.Fatalf("read after system gc: %d", code)
	}
}
