package command

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

func digestOf(b string) string {
	h := sha256.Sum256([]byte(b))
	return hex.EncodeToString(h[:])
}

// outputsAPI serves one allocation with outputs and their blobs; blobs
// maps a digest to the bytes served for it (which may be wrong).
func outputsAPI(t *testing.T, outs []*api.ArtifactRef, blobs map[string]string) *httptest.Server {
	alloc := &api.Allocation{ID: "a1b2c3d4-1111-2222-3333-444455556666", JobID: "train", TaskGroup: "g", ClientStatus: "complete", Outputs: outs,
		Job: &api.Job{ID: "train", TaskGroups: []*api.TaskGroup{{Name: "g", Tasks: []*api.Task{{Name: "main", Artifacts: []*api.TaskArtifact{{GetterSource: "artifact://sha256/" + strings.Repeat("a", 64), RelativeDest: "local/data"}}}}}}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/allocations", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.Allocation{alloc})
	})
	mux.HandleFunc("GET /v1/allocation/{id}", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(alloc)
	})
	mux.HandleFunc("GET /v1/artifact/sha256/{hex}", func(w http.ResponseWriter, r *http.Request) {
		b, ok := blobs[r.PathValue("hex")]
		if !ok {
			http.Error(w, `{"error":"artifact not found"}`, 404)
			return
		}
		w.Write([]byte(b))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestAllocOutputsListAndDownload lists the outputs, downloads them
// beneath DEST with identical bytes, and alloc status shows inputs and
// outputs.
func TestAllocOutputsListAndDownload(t *testing.T) {
	outs := []*api.ArtifactRef{
		{Path: "main/metrics.json", Digest: digestOf(`{"loss":0.1}`), Size: 12},
		{Path: "main/ckpt/step-1.bin", Digest: digestOf("weights"), Size: 7},
	}
	ts := outputsAPI(t, outs, map[string]string{outs[0].Digest: `{"loss":0.1}`, outs[1].Digest: "weights"})
	r := runCmd(t, ts.URL, "alloc", "outputs", "a1b2")
	if r.code != 0 || !strings.Contains(r.out, "main/ckpt/step-1.bin") || !strings.Contains(r.out, "artifact://sha256/"+outs[0].Digest) {
		t.Fatalf("list: exit %d out %q err %q", r.code, r.out, r.err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	r = runCmd(t, ts.URL, "alloc", "outputs", "a1b2", dest)
	if r.code != 0 {
		t.Fatalf("download: exit %d err %q", r.code, r.err)
	}
	for p, want := range map[string]string{"main/metrics.json": `{"loss":0.1}`, "main/ckpt/step-1.bin": "weights"} {
		if b, err := os.ReadFile(filepath.Join(dest, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	r = runCmd(t, ts.URL, "alloc", "status", "a1b2")
	for _, want := range []string{"Inputs", "local/data", "Outputs", "main/metrics.json"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("alloc status lacks %q:\n%s", want, r.out)
		}
	}
}

// TestExploitAllocOutputsPathEscape: a recorded output path with ".."
// or an absolute path is refused and nothing is written outside DEST; a
// blob whose bytes do not match its digest is an error and leaves no
// file.
func TestExploitAllocOutputsPathEscape(t *testing.T) {
	for _, p := range []string{"../escape.txt", "main/../../escape.txt", "/tmp/escape.txt"} {
		t.Run(p, func(t *testing.T) {
			outs := []*api.ArtifactRef{{Path: p, Digest: digestOf("x"), Size: 1}}
			ts := outputsAPI(t, outs, map[string]string{outs[0].Digest: "x"})
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			r := runCmd(t, ts.URL, "alloc", "outputs", "a1b2", dest)
			if r.code != 1 || !strings.Contains(r.err, "Refusing output") {
				t.Fatalf("exit %d err %q", r.code, r.err)
			}
			if _, err := os.Stat(filepath.Join(parent, "escape.txt")); !os.IsNotExist(err) {
				t.Fatal("a file was written outside DEST")
			}
		})
	}
	t.Run("mismatch", func(t *testing.T) {
		outs := []*api.ArtifactRef{{Path: "main/m.json", Digest: digestOf("good"), Size: 4}}
		ts := outputsAPI(t, outs, map[string]string{outs[0].Digest: "evil"})
		dest := t.TempDir()
		r := runCmd(t, ts.URL, "alloc", "outputs", "a1b2", dest)
		if r.code != 1 || !strings.Contains(r.err, "want 4 bytes sha256:"+outs[0].Digest) {
			t.Fatalf("exit %d err %q", r.code, r.err)
		}
		ents, _ := os.ReadDir(filepath.Join(dest, "main"))
		if len(ents) != 0 {
			t.Fatalf("left %v", ents)
		}
	})
}
