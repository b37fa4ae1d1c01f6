package http

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// artServer is a real server of a servertest cluster whose peers' HTTP
// addresses come from the test (servertest runs without gossip).
type artServer struct {
	routedServer
	self string
}

func (a artServer) ArtifactPeers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, u := range a.urls {
		if u != a.self {
			out = append(out, u)
		}
	}
	return out
}

// artCluster is three real servers, each behind its own API.
type artCluster struct {
	c    *servertest.Cluster
	apis []*httptest.Server
	mu   sync.Mutex
	urls map[string]string
}

func newArtCluster(t *testing.T, maxArtifact int64) *artCluster {
	t.Helper()
	return newArtClusterACL(t, maxArtifact, false)
}

// newArtClusterACL is newArtCluster with ACLs on or off (no TLS either
// way).
func newArtClusterACL(t *testing.T, maxArtifact int64, aclOn bool) *artCluster {
	t.Helper()
	ac := &artCluster{urls: map[string]string{}}
	c := servertest.NewCluster(t, 3, servertest.WithConfig(func(cfg *server.Config) {
		cfg.LeaderLookup = nil
		self := string(cfg.Transport.LocalAddr())
		cfg.ArtifactPeers = func() []string {
			ac.mu.Lock()
			defer ac.mu.Unlock()
			var out []string
			for raftAddr, u := range ac.urls {
				if raftAddr != self {
					out = append(out, u)
				}
			}
			return out
		}
	}))
	c.WaitForLeader()
	ac.c = c
	for i := 0; i < c.Size(); i++ {
		srv := artServer{routedServer: routedServer{Server: c.Server(i), mu: &ac.mu, urls: ac.urls}}
		h, err := New(Config{Server: &srv, MaxArtifactBytes: maxArtifact, ACLEnabled: aclOn})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		ac.mu.Lock()
		ac.urls[c.Addr(i)] = hostOf(ts)
		ac.mu.Unlock()
		srv.self = hostOf(ts) // the handler holds &srv
		ac.apis = append(ac.apis, ts)
	}
	return ac
}

func (ac *artCluster) blobPath(i int, d string) string {
	return filepath.Join(ac.c.Server(i).ArtifactStore().Dir(), "sha256", d[:2], d)
}

func randomBytes(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:])
}

// send does one request with a raw body (nil: none) and headers.
func send(t *testing.T, method, url string, body []byte, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1, out, resp.Header // cut short
	}
	return resp.StatusCode, out, resp.Header
}

// TestArtifactsUploadThroughFollowerReplicatedDedupedRepaired covers
// Must-show 2 (corrupt blob detected and repaired from another server)
// and the upload path: an upload through a follower is stored on every
// server before it is acknowledged; the same bytes again send no blob; a
// corrupted or lost blob on one server is an error (never bad bytes), then
// repaired from another server with identical bytes.
func TestArtifactsUploadThroughFollowerReplicatedDedupedRepaired(t *testing.T) {
	ac := newArtCluster(t, 0)
	data, d := randomBytes(t, 3*64<<10+123)
	f := ac.c.Follower()
	code, body, _ := send(t, "PUT", ac.apis[f].URL+"/v1/artifact/sha256/"+d+"?media_type=application/octet-stream", data, nil)
	if code != 200 {
		t.Fatalf("upload through a follower: %d %s", code, body)
	}
	var art structs.Artifact
	if err := json.Unmarshal(body, &art); err != nil || art.Digest != d || art.Size != int64(len(data)) {
		t.Fatalf("upload answer %s: %v", body, err)
	}
	// Acknowledged: every live server holds the bytes.
	var inodes []os.FileInfo
	for i := range ac.apis {
		st, err := os.Stat(ac.blobPath(i, d))
		if err != nil {
			t.Fatalf("server %d lacks the blob after the upload was acknowledged: %v", i, err)
		}
		inodes = append(inodes, st)
	}
	// Every server serves it once its state has the metadata.
	for i := range ac.apis {
		waitFor(t, 5*time.Second, func() bool {
			code, got, hdr := send(t, "GET", ac.apis[i].URL+"/v1/artifact/sha256/"+d, nil, nil)
			return code == 200 && bytes.Equal(got, data) && hdr.Get(HeaderArtifactDigest) == d
		}, fmt.Sprintf("server %d serves the artifact", i))
	}
	// The same bytes again: missing says stored, the upload sends no body
	// and rewrites nothing.
	code, body, _ = send(t, "POST", ac.apis[f].URL+"/v1/artifacts/missing", []byte(`{"Digests":["`+d+`"]}`), nil)
	if code != 200 || !strings.Contains(string(body), `"Missing": []`) {
		t.Fatalf("missing after upload: %d %s", code, body)
	}
	j1 := statetest.Job()
	j1.ID, j1.Name = "j1", "j1"
	ac.c.Register(j1)
	if code, body, _ = send(t, "PUT", ac.apis[f].URL+"/v1/artifact/sha256/"+d+"?job=j1", nil, nil); code != 200 || !strings.Contains(string(body), `"default/j1"`) {
		t.Fatalf("second upload without bytes: %d %s", code, body)
	}
	for i := range ac.apis {
		st, err := os.Stat(ac.blobPath(i, d))
		if err != nil || !os.SameFile(st, inodes[i]) {
			t.Fatalf("server %d: the blob was rewritten by the second upload", i)
		}
	}

	// Corrupt the blob on a follower: its read fails (never the whole bad
	// bytes), then it repairs from another server.
	x := (f + 1) % 3
	if x == ac.c.Leader() {
		x = (x + 1) % 3
	}
	fh, err := os.OpenFile(ac.blobPath(x, d), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte{^data[1000]}, 1000)
	fh.Close()
	code, got, _ := send(t, "GET", ac.apis[x].URL+"/v1/artifact/sha256/"+d, nil, nil)
	if code == 200 && bytes.Equal(got, data) {
		// The first read may already be served by an inline repair only
		// when nothing went out; a whole good copy is fine, a bad one not.
	} else if len(got) >= len(data) {
		t.Fatalf("corrupt read handed out %d bytes (status %d)", len(got), code)
	}
	waitFor(t, 10*time.Second, func() bool {
		code, got, _ := send(t, "GET", ac.apis[x].URL+"/v1/artifact/sha256/"+d, nil, nil)
		return code == 200 && bytes.Equal(got, data)
	}, "the corrupt blob is repaired from another server")
	if onDisk, err := os.ReadFile(ac.blobPath(x, d)); err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("repaired blob on disk differs: %v", err)
	}

	// A server that lost the blob pulls it on the next read.
	if err := os.Remove(ac.blobPath(x, d)); err != nil {
		t.Fatal(err)
	}
	if code, got, _ := send(t, "GET", ac.apis[x].URL+"/v1/artifact/sha256/"+d, nil, nil); code != 200 || !bytes.Equal(got, data) {
		t.Fatalf("read on a server that lost the blob: %d, %d bytes", code, len(got))
	}
}

// TestArtifactsBadInput: a malformed digest in the path, a body that does
// not hash to the path's digest, a body over the limit, too many digests
// in missing, and an unknown digest each get a clear error and store
// nothing.
func TestArtifactsBadInput(t *testing.T) {
	ac := newArtCluster(t, 1<<20)
	leader := ac.apis[ac.c.Leader()].URL
	data, d := randomBytes(t, 1000)
	cases := []struct {
		name, method, path string
		body               []byte
		code               int
		msg                string
	}{
		{"bad digest", "PUT", "/v1/artifact/sha256/XYZ", data, 400, "path digest"},
		{"upper-case digest", "GET", "/v1/artifact/sha256/" + strings.ToUpper(d), nil, 400, "lower-case hex"},
		{"digest mismatch", "PUT", "/v1/artifact/sha256/" + d, append([]byte("x"), data...), 400, "digest mismatch"},
		{"oversize", "PUT", "/v1/artifact/sha256/" + d, make([]byte, 2<<20), 413, "limits.artifact_max_bytes"},
		{"unknown", "GET", "/v1/artifact/sha256/" + d, nil, 404, "not found"},
		{"unknown meta", "GET", "/v1/artifact/sha256/" + d + "/meta", nil, 404, "not found"},
		{"missing bad digest", "POST", "/v1/artifacts/missing", []byte(`{"Digests":["nothex"]}`), 400, "Digests[0]"},
	}
	many := make([]string, structs.MaxArtifactMissingDigests+1)
	for i := range many {
		many[i] = d
	}
	mb, _ := json.Marshal(map[string][]string{"Digests": many})
	cases = append(cases, struct {
		name, method, path string
		body               []byte
		code               int
		msg                string
	}{"too many digests", "POST", "/v1/artifacts/missing", mb, 400, "at most 10000"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := send(t, tc.method, leader+tc.path, tc.body, nil)
			if code != tc.code || !strings.Contains(string(body), tc.msg) {
				t.Fatalf("%s %s: %d %s, want %d with %q", tc.method, tc.path, code, body, tc.code, tc.msg)
			}
		})
	}
	for i := range ac.apis {
		if list, _ := ac.c.Server(i).ArtifactStore().List(); len(list) != 0 {
			t.Fatalf("server %d stored %v from refused uploads", i, list)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestArtifactSyncPullsMissingBlobs: a server that lacks a blob whose
// metadata it holds (it missed the leader's push) fetches it from another
// server on its own, verified, without waiting for a reader: when asked
// (SyncArtifacts) and, woken by the next artifact's metadata, by itself.
func TestArtifactSyncPullsMissingBlobs(t *testing.T) {
	ac := newArtCluster(t, 0)
	leader := ac.apis[ac.c.Leader()].URL
	data, d := randomBytes(t, 200<<10)
	if code, body, _ := send(t, "PUT", leader+"/v1/artifact/sha256/"+d, data, nil); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	x := ac.c.Follower()
	srv := ac.c.Server(x)
	waitFor(t, 5*time.Second, func() bool { a, _ := srv.State().ArtifactByDigest(nil, d); return a != nil }, "the follower applies the metadata")
	if err := os.Remove(ac.blobPath(x, d)); err != nil {
		t.Fatal(err)
	}
	if n, err := srv.SyncArtifacts(t.Context()); err != nil || n != 1 {
		t.Fatalf("SyncArtifacts = %d, %v", n, err)
	}
	if got, err := os.ReadFile(ac.blobPath(x, d)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("synced blob differs: %v", err)
	}
	if err := os.Remove(ac.blobPath(x, d)); err != nil {
		t.Fatal(err)
	}
	other, od := randomBytes(t, 1000)
	if code, body, _ := send(t, "PUT", leader+"/v1/artifact/sha256/"+od, other, nil); code != 200 {
		t.Fatalf("second upload: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, func() bool {
		got, err := os.ReadFile(ac.blobPath(x, d))
		return err == nil && bytes.Equal(got, data)
	}, "the follower's sync to fetch the blob it lost")
}
