package server

import (
	"context"
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// DefaultArtifactGCThreshold is how long an artifact no job or allocation
// references is kept: 24 hours (counted from its last upload or new
// reference, ModifyTime).
const DefaultArtifactGCThreshold = 24 * time.Hour

// orphanBlobGrace is how old a blob without metadata must be before a
// server removes it: a blob is stored (and pushed to the other servers)
// before its metadata commits, so a young orphan may be an upload in
// flight. An hour covers an upload of the largest artifact at 2 MiB/s.
const orphanBlobGrace = time.Hour

// selectArtifactGC returns the artifacts a collection at now (Unix ns)
// removes: those whose every job reference names a job that no longer
// exists and every allocation reference one that no longer exists, and
// whose ModifyTime is at least threshold before now (zero threshold: any
// age, `system gc`). Each removal is conditional on the ModifyIndex seen.
func selectArtifactGC(snap *state.StateSnapshot, now int64, threshold time.Duration) ([]*structs.ArtifactDelete, error) {
	arts, err := snap.Artifacts(nil)
	if err != nil {
		return nil, err
	}
	var out []*structs.ArtifactDelete
	for _, a := range arts {
		if now-a.ModifyTime < int64(threshold) {
			continue
		}
		ref, err := artifactReferenced(snap, a)
		if err != nil {
			return nil, err
		}
		if !ref {
			out = append(out, &structs.ArtifactDelete{Digest: a.Digest, ModifyIndex: a.ModifyIndex})
		}
	}
	return out, nil
}

// artifactReferenced reports whether a job (any version: jobs are stored
// by ID; it must be in the namespace the reference names) or an
// allocation named in a's references still exists.
func artifactReferenced(snap *state.StateSnapshot, a *structs.Artifact) (bool, error) {
	for _, ref := range a.JobRefs {
		_, id, ok := structs.SplitArtifactJobRef(ref)
		if !ok {
			continue
		}
		j, err := snap.JobByID(nil, id)
		if err != nil {
			return false, err
		}
		if structs.ArtifactJobRefMatches(ref, j) {
			return true, nil
		}
	}
	for _, id := range a.AllocRefs {
		al, err := snap.AllocByID(nil, id)
		if err != nil {
			return false, err
		}
		if al != nil {
			return true, nil
		}
	}
	return false, nil
}

// collectArtifacts removes the metadata of unreferenced artifacts older
// than threshold through Raft, in entries of at most maxIDs digests; each
// server then removes the blobs (blobRemovalLoop). It returns how many it
// chose.
func (s *Server) collectArtifacts(ctx context.Context, now int64, threshold time.Duration, maxIDs int) (int, error) {
	snap, err := s.fsm.State().Snapshot()
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	dels, err := selectArtifactGC(snap, now, threshold)
	if err != nil {
		return 0, err
	}
	for start := 0; start < len(dels); start += maxIDs {
		end := min(start+maxIDs, len(dels))
		if err := s.gcApply(ctx, structs.ArtifactDeleteRequestType, &structs.ArtifactDeleteRequest{Artifacts: dels[start:end]}); err != nil {
			return start, err
		}
	}
	return len(dels), nil
}

// queueBlobRemoval is the FSM's OnArtifactsDeleted: it hands the digests
// to blobRemovalLoop without blocking the apply. When the queue is full
// the digests are left to the loop's periodic orphan sweep.
func (s *Server) queueBlobRemoval(digests []string) {
	select {
	case s.blobGC <- digests:
	default:
	}
}

// blobRemovalLoop removes from this server's store the blobs whose
// metadata was deleted, and once an hour the orphan blobs (no metadata,
// older than orphanBlobGrace) an interrupted upload or a missed queue
// entry left. It runs on every server until ctx ends.
func (s *Server) blobRemovalLoop(ctx context.Context) {
	log := s.logger.Named("artifacts")
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ds := <-s.blobGC:
			for _, d := range ds {
				s.removeBlobIfUnknown(d, 0)
			}
		case <-t.C:
			n, err := s.SweepOrphanBlobs(orphanBlobGrace)
			if err != nil {
				log.Warn("orphan blob sweep failed", "error", err)
			} else if n > 0 {
				log.Info("removed orphan blobs", "count", n)
			}
		}
	}
}

// SweepOrphanBlobs removes the blobs of this server's store that have no
// metadata and were written at least grace ago, and the temporary files
// of uploads last written at least grace ago (a crash or a lost
// connection left them), and returns how many blobs and files it removed.
func (s *Server) SweepOrphanBlobs(grace time.Duration) (int, error) {
	n, err := s.artifacts.RemoveTemp(grace)
	if err != nil {
		return n, err
	}
	ds, err := s.artifacts.List()
	if err != nil {
		return n, err
	}
	for _, d := range ds {
		if s.removeBlobIfUnknown(d, grace) {
			n++
		}
	}
	return n, nil
}

// removeBlobIfUnknown removes digest's blob when the state has no
// metadata for it and the file is at least grace old; it reports whether
// it removed it.
func (s *Server) removeBlobIfUnknown(digest string, grace time.Duration) bool {
	a, err := s.fsm.State().ArtifactByDigest(nil, digest)
	if err != nil || a != nil {
		return false
	}
	if grace > 0 {
		st, err := s.artifacts.Stat(digest)
		if err != nil || time.Since(st.ModTime()) < grace {
			return false
		}
	}
	if err := s.artifacts.Remove(digest); err != nil {
		s.logger.Named("artifacts").Warn("cannot remove blob", "digest", digest, "error", err)
		return false
	}
	return true
}
