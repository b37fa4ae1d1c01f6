package http

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// tailClient records the tail a request asked for.
type tailClient struct {
	*fakeClient
	lines int
	bytes int64
}

func (c *tailClient) AllocLogsTail(ctx context.Context, allocID, task, logType string, follow bool, lines int, bytes int64) (io.ReadCloser, error) {
	c.lines, c.bytes = lines, bytes
	return c.AllocLogs(ctx, allocID, task, logType, follow)
}

func TestLogsTailParameters(t *testing.T) {
	fs, fc, _ := fixture(t)
	tc := &tailClient{fakeClient: fc}
	h, err := New(Config{Server: fs, Client: tc})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/client/fs/logs/a1b2c3d4-0000?task=main&plain=true"
	cases := []struct {
		query      string
		status     int
		lines      int
		bytes      int64
		errMention string
	}{
		{"&lines=5", 200, 5, 0, ""},
		{"&origin=end&offset=100", 200, 0, 100, ""},
		{"", 200, 0, 0, ""},
		{"&lines=-1", 400, 0, 0, "lines"},
		{"&lines=x", 400, 0, 0, "lines"},
		{"&origin=middle", 400, 0, 0, "origin"},
		{"&offset=10", 400, 0, 0, "origin=end"},
		{"&origin=end&offset=-3", 400, 0, 0, "offset"},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			tc.lines, tc.bytes = 0, 0
			req, _ := http.NewRequest("GET", base+c.query, nil)
			rec := &recorder{header: http.Header{}}
			h.ServeHTTP(rec, req)
			if rec.status != c.status {
				t.Fatalf("status %d (%s), want %d", rec.status, rec.body.String(), c.status)
			}
			if c.status == 200 && (tc.lines != c.lines || tc.bytes != c.bytes) {
				t.Fatalf("tail asked lines %d bytes %d, want %d %d", tc.lines, tc.bytes, c.lines, c.bytes)
			}
			if c.errMention != "" && !strings.Contains(rec.body.String(), c.errMention) {
				t.Fatalf("error %q does not mention %q", rec.body.String(), c.errMention)
			}
		})
	}
}

// recorder is a minimal http.ResponseWriter for in-process requests.
type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
