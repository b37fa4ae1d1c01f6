package http

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// artifactReferencer is what a job's artifact:// inputs need from the
// server (*server.Server implements it).
type artifactReferencer interface {
	ArtifactGet(ctx context.Context, digest string, q *structs.QueryOptions) (*structs.Artifact, structs.QueryMeta, error)
	ArtifactReference(ctx context.Context, digest string, jobIDs, allocIDs []string) (*structs.Artifact, error)
}

var _ artifactReferencer = (*server.Server)(nil)

// referenceJobArtifacts checks that the caller of r may read every stored
// artifact job's tasks fetch (artifact://sha256/<hex> sources), then
// records job as a reference of each: the nodes that run it may then fetch
// them, and retention keeps them while the job exists. Knowing a digest is
// no right to its bytes: an input the caller could not read itself is
// refused (403), and an unknown one is a 400 naming it, before anything is
// registered. A reference recorded for a job whose register then fails
// keeps nothing: retention counts only references to existing jobs.
func (h *handler) referenceJobArtifacts(r *http.Request, job *structs.Job) error {
	digests := job.ArtifactDigests()
	if len(digests) == 0 {
		return nil
	}
	ar, ok := h.srv.(artifactReferencer)
	if !ok {
		return fmt.Errorf("%w: job %q: this server stores no artifacts", structs.ErrInvalid, job.ID)
	}
	ctx := r.Context()
	for _, d := range digests {
		a, _, err := ar.ArtifactGet(ctx, d, &structs.QueryOptions{AllowStale: true})
		if err != nil || a == nil {
			return fmt.Errorf("%w: job %q: artifact %s%s is not stored (upload it with `gpulayer artifact put`)",
				structs.ErrInvalid, job.ID, structs.ArtifactRefPrefix, d)
		}
		if !h.artifactReadable(r, a) {
			return fmt.Errorf("%w: job %q: artifact %s%s is not readable with this token",
				structs.ErrPermissionDenied, job.ID, structs.ArtifactRefPrefix, d)
		}
	}
	for _, d := range digests {
		if _, err := ar.ArtifactReference(ctx, d, []string{structs.ArtifactJobRef(job.Namespace, job.ID)}, nil); err != nil {
			return fmt.Errorf("job %q: reference artifact %s: %w", job.ID, d, err)
		}
	}
	return nil
}
