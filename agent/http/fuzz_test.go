package http

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequests sends arbitrary bodies and query strings to the write and
// blocking routes: the handler must never panic, and answers anything it
// cannot read with a 4xx, never a 5xx.
func FuzzRequests(f *testing.F) {
	f.Add(jobBody, "index=1&wait=5s")
	f.Add(`{"Job": null}`, "index=-1")
	f.Add(`{"JobHCL": "job \"x\" {"}`, "wait=1h&stale=maybe")
	f.Add(`[1, 2`, "prefix=%zz")
	f.Add(`{"Job": {"TaskGroups": [null, {"Tasks": [null]}]}}`, "")
	fs := newFakeServer()
	h, err := New(Config{Server: fs, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, query string) {
		for _, target := range []struct{ method, path string }{
			{"PUT", "/v1/jobs"}, {"POST", "/v1/jobs/parse"}, {"GET", "/v1/jobs"},
		} {
			req := httptest.NewRequest(target.method, "/", strings.NewReader(body))
			req.URL.Path = target.path
			req.URL.RawQuery = query
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s?%s with %q: status %d: %s", target.method, target.path, query, body, rec.Code, rec.Body)
			}
			if rec.Code != http.StatusOK && !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("status %d without an error body: %s", rec.Code, rec.Body)
			}
		}
	})
}
