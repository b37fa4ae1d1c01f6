package agent_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
)

// TestTLSArtifactSyncAfterMissedPush: with mTLS and ACLs on, a server that
// was down while an artifact was uploaded (it missed the leader's push)
// fetches the blob by itself when it is back, authenticated by its server
// certificate alone (no token), and then serves identical bytes.
func TestTLSArtifactSyncAfterMissedPush(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("starts three agent processes")
	}
	c := startTLSCluster(t, 3, 0)
	leader := c.waitStable(30 * time.Second)
	var down *proc
	for _, p := range c.servers {
		if p != leader {
			down = p
			break
		}
	}
	down.kill()
	data := make([]byte, 300<<10)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	put := func(p *proc, body []byte, digest string) {
		t.Helper()
		waittest.For(t, 30*time.Second, "upload "+digest[:12], func() (bool, string) {
			req, _ := http.NewRequest(http.MethodPut, p.url()+"/v1/artifact/sha256/"+digest, bytes.NewReader(body))
			resp, err := c.http.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == 200, fmt.Sprintf("%d %s", resp.StatusCode, b)
		})
	}
	put(leader, data, d)
	down.start()
	c.waitStable(60 * time.Second)
	// New metadata wakes the returned server's sync (it also runs at
	// start and retries while blobs are missing).
	other := []byte("wake the sync")
	os2 := sha256.Sum256(other)
	put(leader, other, hex.EncodeToString(os2[:]))
	blob := filepath.Join(c.root, down.name, "server", "artifacts", "sha256", d[:2], d)
	waittest.For(t, 60*time.Second, "the returned server to fetch the blob it missed", func() (bool, string) {
		got, err := os.ReadFile(blob)
		if err != nil {
			return false, err.Error()
		}
		return bytes.Equal(got, data), fmt.Sprintf("%d bytes", len(got))
	})
	req, _ := http.NewRequest(http.MethodGet, down.url()+"/v1/artifact/sha256/"+d, nil)
	req.Header.Set("X-Gpulayer-Replica", "1") // its own copy only: no pull
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("returned server serves %d, %d bytes, %v", resp.StatusCode, len(got), err)
	}
}
