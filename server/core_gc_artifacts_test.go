package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/artifacts"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// storeArtifact stores data in s's blob store and commits its metadata
// with the job references given; it returns the digest.
func storeArtifact(t *testing.T, s *server.Server, data []byte, jobRefs ...string) string {
	t.Helper()
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	if _, _, err := s.ArtifactStore().Put(d, bytes.NewReader(data), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ArtifactUpsert(ctxT(t), &structs.Artifact{Digest: d, Size: int64(len(data)), JobRefs: jobRefs}); err != nil {
		t.Fatal(err)
	}
	return d
}

func artifactGone(t *testing.T, s *server.Server, d string) bool {
	t.Helper()
	a, err := s.State().ArtifactByDigest(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	_, serr := s.ArtifactStore().Stat(d)
	return a == nil && errors.Is(serr, artifacts.ErrNotFound)
}

// TestArtifactRetention is Must-show 3 (server half): the leader's
// periodic collection removes an artifact no existing job references once
// it is older than artifact_gc_threshold (its metadata through Raft, then
// its blob from disk), keeps a referenced one and a young one, and
// `system gc` removes an unreferenced one at once.
func TestArtifactRetention(t *testing.T) {
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.GC.Interval = time.Second
		c.GC.ArtifactGCThreshold = 2 * time.Second
	}))
	job := statetest.Job()
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	kept := storeArtifact(t, s, []byte("referenced by a live job"), structs.ArtifactJobRef(job.Namespace, job.ID))
	unref := storeArtifact(t, s, []byte("referenced by nothing"))
	purged := storeArtifact(t, s, []byte("referenced by a job that is gone"), "default/no-such-job")
	// The live job's ID in another namespace is not the live job.
	otherNS := storeArtifact(t, s, []byte("referenced by the same ID elsewhere"), structs.ArtifactJobRef("elsewhere", job.ID))
	start := time.Now()
	waittest.Until(t, 15*time.Second, "the unreferenced artifacts to be collected", func() bool {
		return artifactGone(t, s, unref) && artifactGone(t, s, purged) && artifactGone(t, s, otherNS)
	})
	if time.Since(start) < 2*time.Second {
		t.Fatalf("collected after %s, before artifact_gc_threshold (2s)", time.Since(start))
	}
	if artifactGone(t, s, kept) {
		t.Fatal("the artifact a live job references was collected")
	}
	forced := storeArtifact(t, s, []byte("collected by system gc"))
	res, err := s.SystemGC(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Artifacts != 1 {
		t.Fatalf("system gc removed %d artifacts, want 1", res.Artifacts)
	}
	waittest.Until(t, 5*time.Second, "system gc to remove the blob", func() bool { return artifactGone(t, s, forced) })
	if artifactGone(t, s, kept) {
		t.Fatal("system gc collected the referenced artifact")
	}
}
