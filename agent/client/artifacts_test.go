package client

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/artifacts"
	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	return buf.Bytes()
}

func hexSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func lastEvent(a *structs.Allocation, task, typ string) *structs.TaskEvent {
	ts := a.TaskStates[task]
	if ts == nil {
		return nil
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if ts.Events[i].Type == typ {
			return ts.Events[i]
		}
	}
	return nil
}

// TestArtifactInputToOutputOfFailedTask: a directory input from the
// store is unpacked beneath local/, the task copies it to
// $GPULAYER_OUTPUT_DIR and fails; the output is uploaded anyway and
// recorded on the allocation with its digest and size, and the logs are
// archived (LogArchive) with the task's stdout inside.
func TestArtifactInputToOutputOfFailedTask(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	in := srv.Blobs().Add(tarOf(t, map[string]string{"sub/in.txt": "input bytes\n"}))
	a := clienttest.NativeAlloc(c.nodeID(), structs.JobTypeBatch, "/bin/sh",
		[]string{"-c", `cp "$GPULAYER_TASK_DIR/local/data/sub/in.txt" "$GPULAYER_OUTPUT_DIR/out.txt" && mkdir "$GPULAYER_OUTPUT_DIR/d" && echo more > "$GPULAYER_OUTPUT_DIR/d/m" && echo hello-log && exit 3`}, nil)
	a.Job.TaskGroups[0].Tasks[0].Artifacts = []*structs.TaskArtifact{{GetterSource: "artifact://sha256/" + in, RelativeDest: "local/data", GetterMode: "dir"}}
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 20*time.Second, func(x *structs.Allocation) bool {
		return x.ClientStatus == structs.AllocClientStatusFailed && len(x.Outputs) > 0 && x.LogArchive != ""
	})
	if len(got.Outputs) != 2 || got.Outputs[1].Path != "main/out.txt" || got.Outputs[1].Digest != hexSum([]byte("input bytes\n")) || got.Outputs[1].Size != 12 {
		t.Fatalf("outputs %+v", got.Outputs)
	}
	if got.Outputs[0].Path != "main/d/m" {
		t.Fatalf("outputs %+v", got.Outputs[0])
	}
	if b, ok := srv.Blobs().Blob(got.Outputs[1].Digest); !ok || string(b) != "input bytes\n" {
		t.Fatalf("stored output %q %v", b, ok)
	}
	if e := lastEvent(got, "main", structs.TaskEventOutputsUploaded); e == nil || !strings.Contains(e.DisplayMessage, "Uploaded 2 output files") {
		t.Fatalf("no outputs event: %s", clienttest.DescribeTaskStates(got.TaskStates))
	}
	arch, ok := srv.Blobs().Blob(got.LogArchive)
	if !ok {
		t.Fatal("log archive not stored")
	}
	var out bytes.Buffer
	if _, err := artifacts.ReadLogFromArchive(bytes.NewReader(arch), "main", "main.stdout.0", &out); err != nil || !strings.Contains(out.String(), "hello-log") {
		t.Fatalf("archived stdout %q %v", out.String(), err)
	}
}

// TestArtifactHTTPSChecksumMismatchFailsTask: an https input whose bytes
// do not match its checksum fails the task with a "Failed Artifact
// Download" event naming the mismatch; the task never starts.
func TestArtifactHTTPSChecksumMismatchFailsTask(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tampered") }))
	defer ts.Close()
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.ArtifactHTTPClient = ts.Client() })
	a := clienttest.NativeAlloc(c.nodeID(), structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo started"}, nil)
	want := hexSum([]byte("original"))
	a.Job.TaskGroups[0].Tasks[0].Artifacts = []*structs.TaskArtifact{{GetterSource: ts.URL + "/w.bin", Checksum: "sha256:" + want}}
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 20*time.Second, func(x *structs.Allocation) bool { return x.ClientStatus == structs.AllocClientStatusFailed })
	e := lastEvent(got, "main", structs.TaskEventArtifactDownloadFailed)
	if e == nil || !strings.Contains(e.DisplayMessage, "checksum mismatch") || !strings.Contains(e.DisplayMessage, "want sha256:"+want) {
		t.Fatalf("want a Failed Artifact Download event: %s", clienttest.DescribeTaskStates(got.TaskStates))
	}
	if lastEvent(got, "main", structs.TaskEventStarted) != nil {
		t.Fatal("the task started despite the mismatch")
	}
}

// TestOutputsOverLimitRecordNothing: a task over max_files, and one over
// max_bytes, each get a "Failed Outputs Upload" event naming the limit,
// and the allocation records no output at all (nothing half-uploaded).
func TestOutputsOverLimitRecordNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"files", func(c *Config) { c.OutputMaxFiles = 2 }, "more than 2 output files"},
		{"bytes", func(c *Config) { c.OutputMaxBytes = 10 }, "over 10 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := clienttest.NewServer()
			c := newTestClient(t, srv, "", tc.mod)
			a := clienttest.NativeAlloc(c.nodeID(), structs.JobTypeBatch, "/bin/sh",
				[]string{"-c", `cd "$GPULAYER_OUTPUT_DIR" && echo aaaa > a && echo bbbb > b && echo cccc > c`}, nil)
			srv.UpsertAlloc(a)
			got := srv.WaitForAlloc(t, a.ID, 20*time.Second, func(x *structs.Allocation) bool {
				return x.ClientStatus == structs.AllocClientStatusComplete && lastEvent(x, "main", structs.TaskEventOutputsFailed) != nil
			})
			if e := lastEvent(got, "main", structs.TaskEventOutputsFailed); !strings.Contains(e.DisplayMessage, tc.want) {
				t.Fatalf("event %q, want %q", e.DisplayMessage, tc.want)
			}
			// Let the final update land, then check nothing was recorded.
			got = srv.WaitForAlloc(t, a.ID, 10*time.Second, func(x *structs.Allocation) bool { return x.LogArchive != "" })
			if len(got.Outputs) != 0 {
				t.Fatalf("outputs recorded over a limit: %+v", got.Outputs)
			}
			if n := srv.Blobs().Puts(); n != 1 {
				t.Fatalf("%d blobs uploaded, want only the log archive", n)
			}
		})
	}
}

// TestHTTPServerConnArtifacts speaks the contract's routes to a fake
// server that hashes uploads and checks the node secret.
func TestHTTPServerConnArtifacts(t *testing.T) {
	blobs := clienttest.NewBlobs()
	hs := httptest.NewServer(blobs.Handler("node-1", "secret-1"))
	defer hs.Close()
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{hs.URL}})
	if err != nil {
		t.Fatal(err)
	}
	conn.secrets["node-1"] = "secret-1"
	ctx := context.Background()
	body := []byte("checkpoint")
	d := hexSum(body)
	m, err := conn.ArtifactsMissing(ctx, "node-1", []string{d})
	if err != nil || len(m) != 1 {
		t.Fatalf("missing %v %v", m, err)
	}
	if err := conn.ArtifactPut(ctx, "node-1", d, bytes.NewReader(body), int64(len(body)), artifacts.MediaTypeFile, "j", "a"); err != nil {
		t.Fatal(err)
	}
	if err := conn.ArtifactPut(ctx, "node-1", strings.Repeat("0", 64), bytes.NewReader(body), int64(len(body)), artifacts.MediaTypeFile, "j", "a"); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("mismatched upload: %v", err)
	}
	rc, err := conn.ArtifactGet(ctx, "node-1", d)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, body) {
		t.Fatalf("got %q", b)
	}
	if _, err := conn.ArtifactGet(ctx, "node-1", strings.Repeat("1", 64)); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := conn.ArtifactGet(ctx, "node-2", d); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("other node: %v", err)
	}
	if m, _ := conn.ArtifactsMissing(ctx, "node-1", []string{d}); len(m) != 0 {
		t.Fatalf("still missing %v", m)
	}
}

// TestOutputUploadMovesToTheNextServer: a server that answers 503 to an
// upload is skipped on the retry; the outputs reach the next server.
func TestOutputUploadMovesToTheNextServer(t *testing.T) {
	blobs := clienttest.NewBlobs()
	good := httptest.NewServer(blobs.Handler("node-1", "secret-1"))
	defer good.Close()
	var badHits int
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			badHits++
			io.Copy(io.Discard, r.Body)
			http.Error(w, `{"error":"no leader"}`, http.StatusServiceUnavailable)
			return
		}
		blobs.Handler("node-1", "secret-1").ServeHTTP(w, r)
	}))
	defer bad.Close()
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{bad.URL, good.URL}})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetNodeSecret("node-1", "secret-1")
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/ckpt.bin", []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files, _, err := artifacts.CollectOutputs(root, artifacts.OutputLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := artifacts.UploadOutputs(context.Background(), nodeArtifactStore{conn: conn, nodeID: "node-1"}, root, files, "j", "a"); err != nil {
		t.Fatal(err)
	}
	if b, ok := blobs.Blob(hexSum([]byte("weights"))); !ok || string(b) != "weights" || badHits != 1 {
		t.Fatalf("stored %q %v after %d refusals", b, ok, badHits)
	}
}
