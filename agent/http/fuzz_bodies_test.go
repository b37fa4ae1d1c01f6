package http

import (
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// jsonBodyRoutes are the routes that decode a JSON request body.
var jsonBodyRoutes = []struct{ method, path string }{
	{"PUT", "/v1/jobs"}, {"POST", "/v1/jobs/parse"}, {"POST", "/v1/job/x/plan"},
	{"PUT", "/v1/node/register"}, {"POST", "/v1/node/n1/allocations"}, {"PUT", "/v1/node/n1/heartbeat"},
	{"POST", "/v1/node/n1/drain"}, {"POST", "/v1/node/n1/eligibility"}, {"POST", "/v1/allocation/a1/stop"},
	// Nomad API compatibility (issue 12).
	{"PUT", "/v1/jobs/parse"}, {"PUT", "/v1/search"},
}

// FuzzJSONRequestBodies sends arbitrary JSON, also nested to a fuzzed
// depth inside a job's driver Config, meta and the body itself, to every
// route that decodes a JSON body. The handler must never panic or answer
// 5xx, every refusal carries {"error": ...}, and a body nested deeper than
// MaxJSONBodyDepth is always a 400.
func FuzzJSONRequestBodies(f *testing.F) {
	f.Add(jobBody, uint8(0), uint8(0))
	f.Add(`{"a": 1}`, uint8(40), uint8(1))
	f.Add(`[[[[`, uint8(70), uint8(2))
	f.Add(`{"JobHCL": "job \"x\" { meta = { a = [[[[1]]]] } }"}`, uint8(3), uint8(0))
	f.Add(`"\"[[[["`, uint8(100), uint8(3))
	f.Add(`{"Node": {"ID": "n1", "Name": "a b"}}`, uint8(0), uint8(0))
	f.Add(`{"JobHCL": "variable \"n\" {}\njob \"x\" { meta = { a = var.n } }", "Variables": "n = [[[1]]]\n", "Canonicalize": true}`, uint8(0), uint8(0))
	f.Add(`{"Prefix": "a", "Context": "all"}`, uint8(0), uint8(0))
	h, err := New(Config{Server: &planningServer{fakeServer: newFakeServer()}, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, inner string, depth, shape uint8) {
		var body string
		nest := func(open, close string) string {
			return strings.Repeat(open, int(depth)) + inner + strings.Repeat(close, int(depth))
		}
		switch shape % 4 {
		case 0:
			body = inner
		case 1: // inside a task's driver config
			body = `{"Job": {"ID": "x", "Type": "batch", "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{"Name": "t", "Driver": "native", "Config": {"command": "/bin/true", "x": ` +
				nest(`{"a": `, `}`) + `}}]}]}}`
		case 2: // the body itself
			body = nest(`[`, `]`)
		case 3: // inside meta (a map of strings: nesting is a type error)
			body = `{"Job": {"ID": "x", "Meta": {"k": ` + nest(`[`, `]`) + `}}}`
		}
		for _, target := range jsonBodyRoutes {
			req := httptest.NewRequest(target.method, "/", strings.NewReader(body))
			req.URL.Path = target.path
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s with %q: status %d: %s", target.method, target.path, body, rec.Code, rec.Body)
			}
			if rec.Code != http.StatusOK && !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("%s %s: status %d without an error body: %s", target.method, target.path, rec.Code, rec.Body)
			}
			if jobspec.JSONTooDeep([]byte(body), MaxJSONBodyDepth) >= 0 && rec.Code != http.StatusBadRequest && rec.Code != http.StatusNotFound &&
				rec.Code != http.StatusMethodNotAllowed && rec.Code != http.StatusForbidden {
				t.Fatalf("%s %s: a body nested past %d levels got %d, want 400", target.method, target.path, MaxJSONBodyDepth, rec.Code)
			}
		}
	})
}

// TestJSONBodyTooDeep: a body nested past MaxJSONBodyDepth is a 400 naming
// the limit and the byte; brackets inside strings do not count.
func TestJSONBodyTooDeep(t *testing.T) {
	_, _, ts := fixture(t)
	deep := `{"Job": {"ID": "x", "Meta": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`
	resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", deep)
	if resp.StatusCode != 400 || !strings.Contains(body, "nested deeper than 64 levels at byte 90") {
		t.Fatalf("deep body: %d %s", resp.StatusCode, body)
	}
	inString := `{"JobHCL": "` + strings.Repeat("[", 100) + `"}`
	resp, body = doReq(t, "POST", ts.URL+"/v1/jobs/parse", inString)
	if resp.StatusCode != 400 || strings.Contains(body, "nested deeper") {
		t.Fatalf("brackets in a string: %d %s", resp.StatusCode, body)
	}
}
