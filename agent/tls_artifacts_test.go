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

	// An ordinary submit-job token's upload is pushed too: the push carries
	// the server certificate, not the user's token (which the replica
	// route refuses), so every live server holds it once acknowledged.
	policy := map[string]string{"Name": "artifact-writer", "Rules": `namespace "default" { policy = "write" }`}
	if code, body := c.send(leader, http.MethodPut, "/v1/acl/policy/artifact-writer", policy, nil); code != http.StatusOK {
		t.Fatalf("create the writer policy: %d %s", code, body)
	}
	var tok struct{ SecretID string }
	if code, body := c.send(leader, http.MethodPut, "/v1/acl/token", map[string]interface{}{"Name": "w", "Type": "client", "Policies": []string{"artifact-writer"}}, &tok); code != http.StatusOK {
		t.Fatalf("create the writer token: %d %s", code, body)
	}
	user := []byte("uploaded with a user token")
	us := sha256.Sum256(user)
	ud := hex.EncodeToString(us[:])
	req, _ = http.NewRequest(http.MethodPut, leader.url()+"/v1/artifact/sha256/"+ud, bytes.NewReader(user))
	req.Header.Set("X-Nomad-Token", tok.SecretID)
	resp2, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 200 {
		t.Fatalf("upload with a user token: %d %s", resp2.StatusCode, b2)
	}
	for _, p := range c.servers {
		if got, err := os.ReadFile(filepath.Join(c.root, p.name, "server", "artifacts", "sha256", ud[:2], ud)); err != nil || !bytes.Equal(got, user) {
			t.Fatalf("server %s lacks the acknowledged user upload: %v", p.name, err)
		}
	}
}
