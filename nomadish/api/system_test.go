package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSystemGarbageCollect(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		body     string
		want     *GCResult
		wantCode int // of the *StatusError, 0 for success
	}{
		{name: "counts", status: 200, body: `{"Evals":4,"Allocs":3,"Jobs":2,"Nodes":1}`, want: &GCResult{Evals: 4, Allocs: 3, Jobs: 2, Nodes: 1}},
		{name: "no leader", status: 503, body: `{"error":"no cluster leader"}`, wantCode: 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var method, path string
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				method, path = r.Method, r.URL.Path
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			got, err := c.System().GarbageCollectCounts(nil)
			if method != http.MethodPut || path != "/v1/system/gc" {
				t.Fatalf("request %s %s, want PUT /v1/system/gc", method, path)
			}
			plainErr := c.System().GarbageCollect()
			if tc.wantCode != 0 {
				var se *StatusError
				if !errors.As(err, &se) || se.Code != tc.wantCode || !errors.As(plainErr, &se) {
					t.Fatalf("errors %v / %v, want status %d", err, plainErr, tc.wantCode)
				}
				return
			}
			if err != nil || plainErr != nil {
				t.Fatalf("errors %v / %v", err, plainErr)
			}
			if *got != *tc.want {
				t.Fatalf("got %+v, want %+v", *got, *tc.want)
			}
		})
	}
}

// TestPlanEmptyJobID checks that a job without an ID is refused before
// any request (the route would be /v1/job//plan, which the server's mux
// redirects), with a message that says what is wrong.
func TestPlanEmptyJobID(t *testing.T) {
	requests := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests++ }))
	defer ts.Close()
	c, err := NewClient(&Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []*Job{nil, {}} {
		if _, err := c.Jobs().Plan(job); !errors.Is(err, ErrEmptyJobID) {
			t.Fatalf("Plan(%+v) error = %v, want ErrEmptyJobID", job, err)
		}
	}
	if requests != 0 {
		t.Fatalf("%d requests sent for a job without an ID", requests)
	}
}

// TestResourcesJSONDefaults checks that JSON leaving cpu or memory out
// decodes to Nomad's defaults, while an explicit 0 stays 0.
func TestResourcesJSONDefaults(t *testing.T) {
	cases := []struct {
		in          string
		cpu, memory int
	}{
		{`{}`, 100, 300},
		{`{"MemoryMB":50}`, 100, 50},
		{`{"CPU":500}`, 500, 300},
		{`{"CPU":0,"MemoryMB":0}`, 0, 0},
		{`{"Devices":[{"Name":"nvidia/gpu","Count":1}]}`, 100, 300},
	}
	for _, c := range cases {
		var r Resources
		if err := json.Unmarshal([]byte(c.in), &r); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if r.CPU != c.cpu || r.MemoryMB != c.memory {
			t.Errorf("%s: cpu %d memory %d, want %d and %d", c.in, r.CPU, r.MemoryMB, c.cpu, c.memory)
		}
	}
	var r Resources
	if err := json.Unmarshal([]byte(`{"MemoryMB":"lots"}`), &r); err == nil {
		t.Fatal("a string MemoryMB decoded without error")
	}
}
