package http

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyDeadlineSparesRequestsWithoutBody: a GET (no body) held by its
// handler past the body read deadline, as a blocking query is, keeps its
// context and answers; a POST whose body never ends still gets the
// deadline.
func TestBodyDeadlineSparesRequestsWithoutBody(t *testing.T) {
	const bodyTimeout = 100 * time.Millisecond
	h := WithBodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "cut", http.StatusServiceUnavailable)
		case <-time.After(4 * bodyTimeout):
			_, _ = io.WriteString(w, "held")
		}
	}), bodyTimeout, time.Hour)
	ts := httptest.NewServer(h)
	defer ts.Close()

	resp, err := http.Get(ts.URL + "/v1/node/n/client-allocs?index=5&wait=5m")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "held" {
		t.Fatalf("long GET: %d %q, want 200 \"held\" (not cut at the body deadline)", resp.StatusCode, body)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"a":`)) }() // and never more
	resp, err = http.Post(ts.URL+"/v1/jobs", "application/json", pr)
	if err == nil {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "body") {
			t.Fatalf("endless body: %d %q, want 400 from the read deadline", resp.StatusCode, body)
		}
	}
}
