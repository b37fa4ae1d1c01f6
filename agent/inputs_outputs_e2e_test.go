package agent_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// artifactRoutesOn reports whether the agent serves the artifact store's
// routes (the server half of issue 15); without them the test skips.
func artifactRoutesOn(t *testing.T, addr string) bool {
	resp, err := http.Post(addr+"/v1/artifacts/missing", "application/json", strings.NewReader(`{"Digests":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// putBlob uploads b through PUT /v1/artifact/sha256/{hex} and returns the
// hex digest.
func putBlob(t *testing.T, addr string, b []byte, mediaType string) string {
	h := sha256.Sum256(b)
	d := hex.EncodeToString(h[:])
	req, _ := http.NewRequest(http.MethodPut, addr+"/v1/artifact/sha256/"+d+"?media_type="+mediaType, bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT blob: %s", resp.Status)
	}
	return d
}

// TestE2EArtifactInputToOutput runs the real binary: a job with a
// directory input (a tar in the store) copies a file of it to its output
// directory; the output's digest is on the allocation, `alloc outputs`
// downloads identical bytes, and the allocation's log archive is recorded.
// It starts its own dev agent and skips until the artifact routes exist
// on the branch (merged with art-server's).
func TestE2EArtifactInputToOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	dataDir := t.TempDir()
	// The periodic collector purges the finished allocation within
	// seconds; unreferenced artifacts (its log archive) stay a day
	// (artifact_gc_threshold's default).
	conf := filepath.Join(t.TempDir(), "gc.hcl")
	if err := os.WriteFile(conf, []byte(`server {
  job_gc_interval         = "1s"
  job_gc_threshold        = "1s"
  eval_gc_threshold       = "1s"
  batch_eval_gc_threshold = "1s"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startDevAgent(t, dataDir, "-config="+conf)
	if !artifactRoutesOn(t, a.addr) {
		t.Skip("the agent has no /v1/artifacts routes (art-server's half of issue 15 is not on this branch)")
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	body := "dataset row 1\n"
	tw.WriteHeader(&tar.Header{Name: "rows/data.txt", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	in := putBlob(t, a.addr, tb.Bytes(), "application/x-tar")

	job := fmt.Sprintf(`job "artifacts-e2e" {
  type = "batch"
  group "g" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "cp local/data/rows/data.txt $GPULAYER_OUTPUT_DIR/result.txt && echo wrote-output"]
      }
      artifact {
        source      = "artifact://sha256/%s"
        destination = "local/data"
        mode        = "dir"
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, in)
	jobFile := filepath.Join(t.TempDir(), "job.hcl")
	if err := os.WriteFile(jobFile, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", jobFile); code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	alloc := a.waitAllocStatus("artifacts-e2e", structs.AllocClientStatusComplete, structs.AllocClientStatusFailed)
	if alloc.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("alloc %s: %s\n%v", alloc.ClientStatus, alloc.ClientDescription, alloc.TaskStates["main"].Events)
	}
	var full api.Allocation
	waittest.For(t, 30*time.Second, "outputs and the log archive on the allocation", func() (bool, string) {
		a.getJSON("/v1/allocation/"+alloc.ID, &full)
		return len(full.Outputs) == 1 && full.LogArchive != "", fmt.Sprintf("outputs %+v archive %q", full.Outputs, full.LogArchive)
	})
	want := sha256.Sum256([]byte(body))
	if o := full.Outputs[0]; o.Path != "main/result.txt" || o.Digest != hex.EncodeToString(want[:]) || o.Size != int64(len(body)) {
		t.Fatalf("output %+v", o)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if out, code := a.cli("alloc", "outputs", alloc.ID, dest); code != 0 {
		t.Fatalf("alloc outputs exited %d:\n%s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "main", "result.txt")); err != nil || string(b) != body {
		t.Fatalf("downloaded %q %v", b, err)
	}
	if out, code := a.cli("alloc", "logs", alloc.ID, "main"); code != 0 || !strings.Contains(out, "wrote-output") {
		t.Fatalf("alloc logs exited %d: %s", code, out)
	}

	// Collected: the periodic collector removes the dead batch job with
	// its allocation, and the client the allocation's directory; the logs
	// still read, from the archive (`system gc` would remove the archive
	// with them: it forces the artifact collection too).
	allocDir := filepath.Join(dataDir, "client", "allocs", alloc.ID)
	waittest.For(t, 60*time.Second, "the client to remove the alloc dir", func() (bool, string) {
		_, err := os.Stat(allocDir)
		return os.IsNotExist(err), fmt.Sprintf("stat: %v", err)
	})
	if code := a.getJSON("/v1/allocation/"+alloc.ID, nil); code != 404 {
		t.Fatalf("the collected allocation answers %d, want 404", code)
	}
	out, code := a.cli("alloc", "logs", alloc.ID, "main")
	if code != 0 || !strings.Contains(out, "wrote-output") {
		t.Fatalf("alloc logs of the collected allocation exited %d: %s\n(the servers need LogArchiveFor and ArtifactOpen: /work/art-client-merge-glue)", code, out)
	}
}
