package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/command"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
)

// apiClient returns a nomadish/api client of p with the cluster's token.
func (c *testCluster) apiClient(p *proc) *api.Client {
	c.t.Helper()
	cl, err := api.NewClient(&api.Config{Address: p.url(), Token: c.token})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// TestArtifactSurvivesKillOfUploadingServer is Must-show 1's artifact
// half on real processes: `artifact put` through a follower (the leader
// takes the upload, stores it and pushes it before acknowledging), the
// same bytes again send nothing, and after the leader is killed with -9
// the two others still serve identical bytes, for a file and for a
// directory packed as a tar.
func TestArtifactSurvivesKillOfUploadingServer(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("starts three agent processes")
	}
	c := startCluster(t, 3, 0, 0)
	leader := c.waitStable(60 * time.Second)
	var follower *proc
	for _, p := range c.servers {
		if p != leader {
			follower = p
			break
		}
	}
	dir := t.TempDir()
	data := make([]byte, 3<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ckpt.bin")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "sub", "x.txt"), []byte("input"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fc := c.apiClient(follower)
	refs := map[string]bool{}
	for _, path := range []string{file, tree} {
		ref, sent, err := command.PutArtifact(ctx, fc, path, &api.ArtifactPutOptions{})
		if err != nil || !sent {
			t.Fatalf("put %s through a follower: %q sent=%v %v", path, ref, sent, err)
		}
		ref2, sent, err := command.PutArtifact(ctx, fc, path, &api.ArtifactPutOptions{})
		if err != nil || sent || ref2 != ref {
			t.Fatalf("second put of %s: %q sent=%v %v (want the same reference, nothing sent)", path, ref2, sent, err)
		}
		refs[ref] = path == file
	}
	leader.kill()
	for ref, isFile := range refs {
		d, err := api.ParseArtifactRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range c.servers {
			if p == leader {
				continue
			}
			var got []byte
			waittest.NoErr(t, 30*time.Second, "artifact "+d[:12]+" from "+p.name+" after the leader's kill -9", func() (bool, error) {
				rc, err := c.apiClient(p).Artifacts().Get(ctx, d)
				if err != nil {
					return false, err
				}
				defer rc.Close()
				got, err = io.ReadAll(rc)
				return err == nil, err
			})
			if isFile && !bytes.Equal(got, data) {
				t.Fatalf("%s served %d bytes that differ from the upload", p.name, len(got))
			}
			if !isFile && len(got) == 0 {
				t.Fatalf("%s served an empty tar", p.name)
			}
		}
	}
}
