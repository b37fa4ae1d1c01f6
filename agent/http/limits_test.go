package http

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowBody yields n bytes, one every gap.
type slowBody struct {
	n   int
	gap time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap)
	b.n--
	p[0] = 'a'
	return 1, nil
}

// TestWithBodyDeadline: a body slower than the deadline is cut off, except
// the stdin stream of an exec session, which lives as long as the session.
func TestWithBodyDeadline(t *testing.T) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	})
	url := newTestServer(t, WithBodyDeadline(read, 200*time.Millisecond, 0))
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/v1/allocation/a1/exec", http.StatusOK},
		{"/v1/jobs", http.StatusBadRequest},
	} {
		req, err := http.NewRequest(http.MethodPost, url+tc.path, &slowBody{n: 10, gap: 60 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if tc.want == http.StatusOK {
				t.Fatalf("%s: %v", tc.path, err)
			}
			continue // the server closed the connection mid-upload: cut off
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || tc.want == http.StatusOK && !strings.HasPrefix(string(body), "aaaaaaaaaa") {
			t.Fatalf("%s: %d %q, want %d", tc.path, resp.StatusCode, body, tc.want)
		}
	}
}
