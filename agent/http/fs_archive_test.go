package http

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// archiveServer is a fakeServer that also serves artifacts (ArtifactOpen),
// verifying each blob's digest as the real store does.
type archiveServer struct {
	*fakeServer
	blobs map[string][]byte
}

func (s *archiveServer) ArtifactOpen(ctx context.Context, digest string) (io.ReadCloser, error) {
	b, ok := s.blobs[digest]
	if !ok {
		return nil, fmt.Errorf("artifact %s: %w", digest, structs.ErrNotFound)
	}
	h := sha256.Sum256(b)
	if hex.EncodeToString(h[:]) != digest {
		return nil, fmt.Errorf("artifact %s: corrupt", digest)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// logTar packs files as the client's log archive does.
func logTar(t *testing.T, files map[string]string, order []string) ([]byte, string) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range order {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	h := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(h[:])
}

// TestLogsFromArchiveOnceNodeIsGone: a finished allocation whose node is
// gone (unknown to the servers), or whose node no longer has its
// directory, is read from its log archive in rotation order, tails
// included; without an archive the original error stays.
func TestLogsFromArchiveOnceNodeIsGone(t *testing.T) {
	fs := newFakeServer()
	job := &structs.Job{ID: "j", Name: "j", Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g", Tasks: []*structs.Task{{Name: "main", Driver: "native"}}}}}
	fs.jobs["j"] = job
	files := map[string]string{"main/main.stdout.0": "one\ntwo\n", "main/main.stdout.1": "three\n", "main/main.stderr.0": "err\n"}
	arch, digest := logTar(t, files, []string{"main/main.stderr.0", "main/main.stdout.1", "main/main.stdout.0"})
	as := &archiveServer{fakeServer: fs, blobs: map[string][]byte{digest: arch}}
	// gone: its node is unknown; here: on this agent's node, directory gone.
	fs.allocs["gone"] = &structs.Allocation{ID: "gone", JobID: "j", Job: job, TaskGroup: "g", NodeID: "node-9", ClientStatus: structs.AllocClientStatusComplete, LogArchive: digest}
	fs.allocs["here"] = &structs.Allocation{ID: "here", JobID: "j", Job: job, TaskGroup: "g", NodeID: "node-1", ClientStatus: structs.AllocClientStatusFailed, LogArchive: digest}
	fs.allocs["none"] = &structs.Allocation{ID: "none", JobID: "j", Job: job, TaskGroup: "g", NodeID: "node-9", ClientStatus: structs.AllocClientStatusComplete}
	fs.nodes["node-1"] = &structs.Node{ID: "node-1"}
	fc := &fakeClient{node: fs.nodes["node-1"], logs: map[string]string{}}
	h, err := New(Config{Server: as, Client: fc})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	for _, c := range []struct {
		path, query string
		status      int
		want        string
	}{
		{"gone", "", 200, "one\ntwo\nthree\n"},
		{"here", "", 200, "one\ntwo\nthree\n"},
		{"gone", "&type=stderr", 200, "err\n"},
		{"gone", "&lines=2", 200, "two\nthree\n"},
		{"here", "&origin=end&offset=6", 200, "three\n"},
		{"here", "&follow=true", 200, "one\ntwo\nthree\n"},
		{"none", "", 404, "node-9"},
	} {
		resp, body := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/"+c.path+"?task=main&plain=true"+c.query, "")
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s%s: status %d body %q, want %d %q", c.path, c.query, resp.StatusCode, body, c.status, c.want)
		}
		if c.status == 200 && body != c.want {
			t.Errorf("%s%s: body %q, want exactly %q", c.path, c.query, body, c.want)
		}
	}
	// A corrupt archive is an error, never bad bytes.
	as.blobs[digest] = append([]byte("x"), arch...)
	resp, body := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/gone?task=main&plain=true", "")
	if resp.StatusCode == 200 {
		t.Fatalf("corrupt archive served: %q", body)
	}
}

// finderServer also names the log archive of collected allocations.
type finderServer struct {
	*archiveServer
	archives map[string][2]string // alloc ID -> digest, namespace
}

func (s *finderServer) LogArchiveFor(ctx context.Context, allocID string) (string, string, error) {
	v := s.archives[allocID]
	return v[0], v[1], nil
}

// TestLogsOfCollectedAlloc: once the servers collected the allocation,
// its logs are served from the archive its artifact reference names,
// with the task named; an allocation never seen stays a 404.
func TestLogsOfCollectedAlloc(t *testing.T) {
	fs := newFakeServer()
	arch, digest := logTar(t, map[string]string{"main/main.stdout.0": "kept\n"}, []string{"main/main.stdout.0"})
	srv := &finderServer{archiveServer: &archiveServer{fakeServer: fs, blobs: map[string][]byte{digest: arch}},
		archives: map[string][2]string{"collected-1": {digest, "default"}}}
	h, err := New(Config{Server: srv})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, body := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/collected-1?task=main&plain=true", "")
	if resp.StatusCode != 200 || body != "kept\n" {
		t.Fatalf("collected: %d %q", resp.StatusCode, body)
	}
	resp, _ = doReq(t, "GET", ts.URL+"/v1/client/fs/logs/never?task=main&plain=true", "")
	if resp.StatusCode != 404 {
		t.Fatalf("unknown alloc: %d", resp.StatusCode)
	}
}

// TestExploitCollectedAllocLogsNeedNamespaceRight: the route's ACL check
// cannot see a collected allocation's namespace, so the archive is served
// only to a token with read-logs in the archive's namespace (or a
// management token when the namespace is unknown), never to one that may
// read logs elsewhere ("default", the fallback namespace).
func TestExploitCollectedAllocLogsNeedNamespaceRight(t *testing.T) {
	fs := newFakeServer()
	arch, digest := logTar(t, map[string]string{"main/main.stdout.0": "secret\n"}, []string{"main/main.stdout.0"})
	srv := &finderServer{archiveServer: &archiveServer{fakeServer: fs, blobs: map[string][]byte{digest: arch}},
		archives: map[string][2]string{"in-prod": {digest, "prod"}, "unknown-ns": {digest, ""}}}
	h, err := New(Config{Server: srv})
	if err != nil {
		t.Fatal(err)
	}
	hh := h.(*handler)
	logsDefault := structs.NewACL([]*structs.ACLPolicyRules{{Namespaces: []*structs.ACLNamespaceRule{{Name: "default", Capabilities: []string{structs.NamespaceCapabilityReadLogs}}}}})
	logsProd := structs.NewACL([]*structs.ACLPolicyRules{{Namespaces: []*structs.ACLNamespaceRule{{Name: "prod", Capabilities: []string{structs.NamespaceCapabilityReadLogs}}}}})
	for _, c := range []struct {
		alloc string
		acl   *structs.ACL
		ok    bool
	}{
		{"in-prod", logsDefault, false},
		{"in-prod", logsProd, true},
		{"unknown-ns", logsProd, false},
		{"unknown-ns", structs.ManagementACL, true},
	} {
		req := httptest.NewRequest("GET", "/v1/client/fs/logs/"+c.alloc+"?task=main&plain=true", nil)
		req = req.WithContext(context.WithValue(req.Context(), aclCtxKey{}, &aclCtx{acl: c.acl}))
		if got := hh.collectedAlloc(req, c.alloc) != nil; got != c.ok {
			t.Errorf("%s: served %v, want %v", c.alloc, got, c.ok)
		}
	}
}
