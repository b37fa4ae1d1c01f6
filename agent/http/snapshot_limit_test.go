package http

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSnapshotRestoreSizeCap: an archive past Config.MaxSnapshotBytes is
// refused with 413 whether it declares its length or streams it (chunked),
// and nothing reaches the server's restore; one within the cap restores.
func TestSnapshotRestoreSizeCap(t *testing.T) {
	fc := newFakeCluster(true)
	h, err := New(Config{Server: fc, MaxSnapshotBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	put := func(body io.Reader) (int, string) {
		req, err := http.NewRequest(http.MethodPut, ts.URL+"/v1/operator/snapshot", body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	big := "GPULBKUP" + strings.Repeat("x", 2000)
	if code, msg := put(strings.NewReader(big)); code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "limit of 1024 bytes") {
		t.Fatalf("declared length: %d %s", code, msg)
	}
	// io.MultiReader hides the length: the body is sent chunked.
	if code, msg := put(io.MultiReader(strings.NewReader(big))); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d %s", code, msg)
	}
	fc.cmu.Lock()
	restored := fc.restored
	fc.cmu.Unlock()
	if restored != nil {
		t.Fatalf("an archive past the cap reached the restore (%d bytes)", len(restored))
	}
	if code, msg := put(strings.NewReader("GPULBKUP small")); code != http.StatusOK {
		t.Fatalf("small archive: %d %s", code, msg)
	}
}
