package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// validateAPI serves /v1/validate/job with resp and records the job.
func validateAPI(t *testing.T, resp *api.JobValidateResponse) (*httptest.Server, *api.Job) {
	t.Helper()
	got := &api.Job{}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/validate/job", func(w http.ResponseWriter, r *http.Request) {
		var req api.JobValidateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil {
			http.Error(w, `{"Error":"bad body"}`, 400)
			return
		}
		*got = *req.Job
		_ = json.NewEncoder(w).Encode(resp)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts, got
}

const validateSpec = `job "serve" {
  group "llm" {
    count = 3
    network {
      port "http" {}
    }
    endpoint {
      name  = "llm-70b"
      port  = 9000
      model = "m"
    }
    task "t" {
      driver = "native"
    }
  }
}
`

// TestJobValidate: a valid job prints success and exits 0; the server's
// problems are printed at the lines of the fields they name and exit 1;
// the endpoint block reaches the server.
func TestJobValidate(t *testing.T) {
	ts, got := validateAPI(t, &api.JobValidateResponse{DriverConfigValidated: true})
	res := runCmd(t, ts.URL, "job", "validate", writeFile(t, "serve.hcl", validateSpec))
	if res.code != 0 || !strings.Contains(res.out, "Job validation successful") {
		t.Fatalf("valid: %d %q %q", res.code, res.out, res.err)
	}
	if e := got.TaskGroups[0].Endpoint; e == nil || e.Name != "llm-70b" || e.Port != 9000 {
		t.Fatalf("validated job's endpoint %+v", e)
	}
	problems := []string{`group "llm": endpoint: port: 9000 is taken, say`, `group "llm": count: must be 0 or more, got -1`}
	bad := &api.JobValidateResponse{DriverConfigValidated: true, ValidationErrors: problems,
		Error: "invalid job:\n  * " + strings.Join(problems, "\n  * ")}
	ts, _ = validateAPI(t, bad)
	path := writeFile(t, "serve.hcl", validateSpec)
	res = runCmd(t, ts.URL, "job", "validate", path)
	if res.code != 1 {
		t.Fatalf("invalid: exit %d: %q %q", res.code, res.out, res.err)
	}
	for _, w := range []string{"Job validation errors:", "serve.hcl:9:7: " + problems[0], "serve.hcl:3:5: " + problems[1]} {
		if !strings.Contains(res.err, w) {
			t.Fatalf("errors lack %q:\n%s", w, res.err)
		}
	}
	if res := runCmd(t, ts.URL, "job", "validate", "-json", path); res.code != 1 || !strings.Contains(res.stdout+res.out, `"ValidationErrors"`) {
		t.Fatalf("-json: %d %s %s", res.code, res.stdout, res.out)
	}
	if res := runCmd(t, ts.URL, "job", "validate"); res.code == 0 {
		t.Fatal("job validate without a file succeeded")
	}
}
