package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestNodeSecretRotateSendsTheNodeSecretOnly: the command reads the node's
// current secret from -secret-file and sends it to the node's agent (at
// the HTTPAddr the node registered) in X-Gpulayer-Node-Secret, never the
// operator's token; without -secret-file it refuses.
func TestNodeSecretRotateSendsTheNodeSecretOnly(t *testing.T) {
	var mu sync.Mutex
	var rotate http.Header
	var nodeURL string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node/{id}", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"ID": r.PathValue("id"), "HTTPAddr": strings.TrimPrefix(nodeURL, "http://")})
	})
	mux.HandleFunc("PUT /v1/client/node/secret/rotate", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rotate = r.Header.Clone()
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"NodeID": "n1"})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	nodeURL = ts.URL
	t.Setenv("GPULAYER_TOKEN", "operator-token-secret")

	if r := runCmd(t, ts.URL, "node", "secret", "rotate", "n1"); r.code == 0 || !strings.Contains(r.err, "-secret-file") {
		t.Fatalf("without -secret-file: code %d, err %q", r.code, r.err)
	}
	file := filepath.Join(t.TempDir(), "node-secret")
	if err := os.WriteFile(file, []byte("the-node-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, ts.URL, "node", "secret", "rotate", "-secret-file="+file, "n1")
	if r.code != 0 {
		t.Fatalf("rotate: code %d, out %q, err %q", r.code, r.out, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := rotate.Get("X-Gpulayer-Node-Secret"); got != "the-node-secret-0123456789" {
		t.Errorf("node secret header %q", got)
	}
	for k, vs := range rotate {
		for _, v := range vs {
			if strings.Contains(v, "operator-token-secret") {
				t.Errorf("the node's agent was sent the operator's token in %s", k)
			}
		}
	}
}
