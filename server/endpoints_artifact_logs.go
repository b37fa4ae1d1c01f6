package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/gpulayer/gpulayer/server/artifacts"
	"github.com/gpulayer/gpulayer/structs"
)

// ArtifactOpen returns a reader of the blob digest that verifies it while
// it streams (a mismatch is a read error, never bad bytes). It is how
// agent/http's logs route reads an allocation's log archive
// (agent/http.ArtifactOpener). Errors wrap structs.ErrNotFound when no
// artifact has the digest or this server does not hold its blob.
func (s *Server) ArtifactOpen(ctx context.Context, digest string) (io.ReadCloser, error) {
	a, err := s.fsm.State().ArtifactByDigest(nil, digest)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("artifact %s: %w", digest, structs.ErrNotFound)
	}
	rd, err := s.artifacts.Open(digest, a.Size)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, fmt.Errorf("artifact %s: not on this server: %w", digest, structs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// LogArchiveFor names the log archive allocID uploaded (the newest
// artifact of media type structs.MediaTypeLogArchive that references it)
// and the namespace of a job it references that still exists in the
// namespace the reference names ("" when none does). "" and no error when there is no such archive
// (agent/http.LogArchiveFinder).
func (s *Server) LogArchiveFor(ctx context.Context, allocID string) (string, string, error) {
	st := s.fsm.State()
	list, err := st.Artifacts(nil)
	if err != nil {
		return "", "", err
	}
	var best *structs.Artifact
	for _, a := range list {
		if a.MediaType == structs.MediaTypeLogArchive && slices.Contains(a.AllocRefs, allocID) && (best == nil || a.CreateIndex > best.CreateIndex) {
			best = a
		}
	}
	if best == nil {
		return "", "", nil
	}
	ns := ""
	for _, ref := range best.JobRefs {
		rns, id, ok := structs.SplitArtifactJobRef(ref)
		if !ok {
			continue
		}
		if j, err := st.JobByID(nil, id); err == nil && structs.ArtifactJobRefMatches(ref, j) {
			ns = rns
			break
		}
	}
	return best.Digest, ns, nil
}
