package command

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// nsOnlyAPI is an agent as a token scoped to namespace ns sees it: every
// request without ?namespace=<ns> is refused (403), as the route checks
// of such a token refuse the "default" namespace. It serves one
// allocation with an output, the artifact routes and job register and
// plan, and records each request ("METHOD path?query") and the namespace
// of the job registered or planned.
type nsOnlyAPI struct {
	mu        sync.Mutex
	requests  []string
	refused   []string
	blobs     map[string][]byte
	jobNS     string
	allocID   string
	outDigest string
}

func newNSOnlyAPI(t *testing.T, ns string) (*nsOnlyAPI, *httptest.Server) {
	f := &nsOnlyAPI{blobs: map[string][]byte{}, allocID: "a1b2c3d4-1111-2222-3333-444455556666"}
	f.outDigest = digestOf("result")
	f.blobs[f.outDigest] = []byte("result")
	alloc := &api.Allocation{ID: f.allocID, Namespace: ns, JobID: "train", TaskGroup: "g", ClientStatus: "complete",
		Outputs: []*api.ArtifactRef{{Path: "main/out.txt", Digest: f.outDigest, Size: 6}},
		Job:     &api.Job{ID: "train", Namespace: ns, TaskGroups: []*api.TaskGroup{{Name: "g", Tasks: []*api.Task{{Name: "main"}}}}}}
	meta := func(d string) *api.Artifact {
		return &api.Artifact{Digest: d, Size: int64(len(f.blobs[d]))}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/artifacts/missing", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Digests []string }
		json.NewDecoder(r.Body).Decode(&req)
		out := []string{}
		for _, d := range req.Digests {
			if _, ok := f.blobs[d]; !ok {
				out = append(out, d)
			}
		}
		json.NewEncoder(w).Encode(map[string][]string{"Missing": out})
	})
	mux.HandleFunc("PUT /v1/artifact/sha256/{hex}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if digestOf(string(b)) != r.PathValue("hex") {
			http.Error(w, `{"error":"digest mismatch"}`, 400)
			return
		}
		f.blobs[r.PathValue("hex")] = b
		json.NewEncoder(w).Encode(meta(r.PathValue("hex")))
	})
	mux.HandleFunc("GET /v1/artifact/sha256/{hex}", func(w http.ResponseWriter, r *http.Request) {
		w.Write(f.blobs[r.PathValue("hex")])
	})
	mux.HandleFunc("GET /v1/artifact/sha256/{hex}/meta", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(meta(r.PathValue("hex")))
	})
	mux.HandleFunc("GET /v1/artifacts", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.Artifact{meta(f.outDigest)})
	})
	mux.HandleFunc("GET /v1/allocations", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.Allocation{alloc})
	})
	mux.HandleFunc("GET /v1/allocation/{id}", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(alloc)
	})
	job := func(w http.ResponseWriter, r *http.Request) *api.Job {
		var req api.JobRegisterRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Job != nil {
			f.jobNS = req.Job.Namespace
		}
		return req.Job
	}
	mux.HandleFunc("PUT /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		job(w, r)
		json.NewEncoder(w).Encode(&api.JobRegisterResponse{})
	})
	mux.HandleFunc("PUT /v1/job/{id}/plan", func(w http.ResponseWriter, r *http.Request) {
		job(w, r)
		json.NewEncoder(w).Encode(&api.JobPlanResponse{})
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		line := r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery
		f.requests = append(f.requests, line)
		if r.URL.Query().Get("namespace") != ns {
			f.refused = append(f.refused, line)
			http.Error(w, `{"error":"Permission denied"}`, http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return f, ts
}

// TestExploitCLINamespaceScopedToken: with a token scoped to namespace
// alpha, `artifact put|get|ls|inspect`, `alloc outputs` (list and
// download), `job plan` and `job run` given -namespace alpha (or
// GPULAYER_NAMESPACE / NOMAD_NAMESPACE, or a jobspec naming alpha) send
// ?namespace=alpha on every request, `missing` included, and so succeed;
// the job is registered in alpha. On main they sent none and got 403.
func TestExploitCLINamespaceScopedToken(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(src, []byte("some bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.hcl")
	spec := `job "train" {
  type = "batch"
  group "g" {
    task "main" {
      driver = "native"
      config { command = "/bin/true" }
    }
  }
}
`
	if err := os.WriteFile(plain, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	inAlpha := filepath.Join(dir, "alpha.hcl")
	if err := os.WriteFile(inAlpha, []byte(strings.Replace(spec, `type = "batch"`, "type = \"batch\"\n  namespace = \"alpha\"", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPULAYER_NAMESPACE", "")
	t.Setenv("NOMAD_NAMESPACE", "")
	d := digestOf("some bytes")
	cases := []struct {
		name  string
		env   [2]string
		args  []string
		check func(t *testing.T, f *nsOnlyAPI, r result)
	}{
		{"artifact put", [2]string{}, []string{"artifact", "put", "-namespace", "alpha", src}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if !strings.Contains(r.out, "artifact://sha256/"+d) || string(f.blobs[d]) != "some bytes" {
				t.Fatalf("not uploaded: %q", r.out)
			}
		}},
		{"artifact put of stored bytes", [2]string{}, []string{"artifact", "put", "-namespace", "alpha", src}, nil},
		{"artifact get", [2]string{"GPULAYER_NAMESPACE", "alpha"}, []string{"artifact", "get", "artifact://sha256/" + digestOf("result"), filepath.Join(dir, "got")}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || string(b) != "result" {
				t.Fatalf("got %q %v", b, err)
			}
		}},
		{"artifact ls", [2]string{"NOMAD_NAMESPACE", "alpha"}, []string{"artifact", "ls"}, nil},
		{"artifact inspect", [2]string{}, []string{"artifact", "inspect", "-namespace", "alpha", digestOf("result")}, nil},
		{"alloc outputs", [2]string{}, []string{"alloc", "outputs", "-namespace", "alpha", "a1b2"}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if !strings.Contains(r.out, "main/out.txt") {
				t.Fatalf("outputs not listed: %q", r.out)
			}
		}},
		{"alloc outputs download", [2]string{"GPULAYER_NAMESPACE", "alpha"}, []string{"alloc", "outputs", "a1b2", filepath.Join(dir, "outs")}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if b, err := os.ReadFile(filepath.Join(dir, "outs", "main", "out.txt")); err != nil || string(b) != "result" {
				t.Fatalf("downloaded %q %v", b, err)
			}
		}},
		{"job plan -namespace", [2]string{}, []string{"job", "plan", "-namespace", "alpha", plain}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if f.jobNS != "alpha" {
				t.Fatalf("planned in %q", f.jobNS)
			}
		}},
		{"job run -namespace", [2]string{}, []string{"job", "run", "-detach", "-namespace", "alpha", plain}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if f.jobNS != "alpha" {
				t.Fatalf("registered in %q", f.jobNS)
			}
		}},
		{"job run of a jobspec in alpha", [2]string{}, []string{"job", "run", "-detach", inAlpha}, func(t *testing.T, f *nsOnlyAPI, r result) {
			if f.jobNS != "alpha" {
				t.Fatalf("registered in %q", f.jobNS)
			}
		}},
	}
	f, ts := newNSOnlyAPI(t, "alpha")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			f.mu.Lock()
			f.requests, f.refused, f.jobNS = nil, nil, ""
			f.mu.Unlock()
			r := runCmd(t, ts.URL, c.args...)
			f.mu.Lock()
			defer f.mu.Unlock()
			if r.code != 0 || len(f.refused) > 0 {
				t.Fatalf("exit %d, refused %v (all: %v)\nout %q\nerr %q", r.code, f.refused, f.requests, r.out, r.err)
			}
			if len(f.requests) == 0 {
				t.Fatal("no request sent")
			}
			if c.check != nil {
				c.check(t, f, r)
			}
		})
	}
	// Without a namespace the token's 403 is what the CLI reports.
	r := runCmd(t, ts.URL, "artifact", "ls")
	if r.code == 0 {
		t.Fatalf("artifact ls without a namespace succeeded: %q", r.out)
	}
}
