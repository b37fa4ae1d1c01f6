package structs

import (
	"fmt"
	"slices"
	"strings"
)

// Artifact media types.
const (
	// ArtifactMediaFile is a single file's bytes.
	ArtifactMediaFile = "application/octet-stream"
	// ArtifactMediaTar is a directory packed as a deterministic tar
	// (nomadish/artifacttar).
	ArtifactMediaTar = "application/x-tar"
)

// Artifact bounds.
const (
	// ArtifactRefPrefix starts every artifact reference string:
	// "artifact://sha256/<64 lower-case hex digits>".
	ArtifactRefPrefix = "artifact://sha256/"
	// MaxArtifactRefs bounds the job and allocation references one
	// artifact's metadata holds (each list): 1,000.
	MaxArtifactRefs = 1000
	// MaxArtifactMediaTypeLen bounds MediaType: 128 bytes.
	MaxArtifactMediaTypeLen = 128
	// MaxArtifactMissingDigests bounds one POST /v1/artifacts/missing
	// request: 10,000 digests.
	MaxArtifactMissingDigests = 10000
)

// Artifact is the metadata of one content-addressed blob. The bytes live
// in each server's blob store (server/artifacts), never in Raft; this
// record is committed through Raft after a server stored the bytes.
type Artifact struct {
	// Digest is the lower-case hex SHA-256 of the bytes (64 characters).
	Digest string
	// Size is the blob's length in bytes.
	Size int64
	// MediaType is ArtifactMediaFile or ArtifactMediaTar (or another
	// type the uploader named, at most MaxArtifactMediaTypeLen bytes).
	MediaType string
	// CreateTime is when the first upload was committed, Unix nanoseconds.
	CreateTime int64
	// ModifyTime is when the metadata last changed (an upload or a new
	// reference), Unix nanoseconds; retention counts from it.
	ModifyTime int64
	// UploadedBy is the uploader's token accessor ID, "node:<node-id>" for
	// a client's upload, or "" with ACLs off.
	UploadedBy string
	// JobRefs are the jobs that reference the artifact, each
	// "<namespace>/<job-id>" (ArtifactJobRef), sorted. A reference names
	// the namespace so a job of the same ID registered later in another
	// namespace never matches it.
	JobRefs []string
	// AllocRefs are the IDs of the allocations that reference it (their
	// outputs or archived logs), sorted.
	AllocRefs []string

	CreateIndex uint64
	ModifyIndex uint64
}

// Copy returns a deep copy of a (nil for nil).
func (a *Artifact) Copy() *Artifact {
	if a == nil {
		return nil
	}
	c := *a
	c.JobRefs = slices.Clone(a.JobRefs)
	c.AllocRefs = slices.Clone(a.AllocRefs)
	return &c
}

// ArtifactJobRef returns the JobRefs entry of job id in namespace ns
// ("default" when ns is empty): "<namespace>/<job-id>".
func ArtifactJobRef(ns, id string) string {
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + id
}

// SplitArtifactJobRef returns the namespace and job ID of a JobRefs entry
// (namespaces hold no "/", and the ID of a periodic or dispatched child
// does, so it splits at the first one); ok is false for an entry without
// a "/" or with an empty part.
func SplitArtifactJobRef(ref string) (ns, id string, ok bool) {
	i := strings.IndexByte(ref, '/')
	if i <= 0 || i == len(ref)-1 {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

// ArtifactJobRefMatches reports whether ref names job j (its namespace
// and ID).
func ArtifactJobRefMatches(ref string, j *Job) bool {
	return j != nil && ref == ArtifactJobRef(j.Namespace, j.ID)
}

// Ref returns the artifact's reference string, artifact://sha256/<hex>.
func (a *Artifact) Ref() string { return ArtifactRefPrefix + a.Digest }

// Validate checks the fields an upload sets. Errors wrap ErrInvalid and
// name the field.
func (a *Artifact) Validate() error {
	if err := ValidArtifactDigest("Digest", a.Digest); err != nil {
		return err
	}
	if a.Size < 0 {
		return fmt.Errorf("%w: Size: %d is negative", ErrInvalid, a.Size)
	}
	if len(a.MediaType) > MaxArtifactMediaTypeLen {
		return fmt.Errorf("%w: MediaType: %d bytes, at most %d", ErrInvalid, len(a.MediaType), MaxArtifactMediaTypeLen)
	}
	for _, c := range a.MediaType {
		if c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: MediaType: %q has a character outside printable ASCII", ErrInvalid, a.MediaType)
		}
	}
	if len(a.JobRefs) > MaxArtifactRefs || len(a.AllocRefs) > MaxArtifactRefs {
		return fmt.Errorf("%w: JobRefs/AllocRefs: at most %d each", ErrInvalid, MaxArtifactRefs)
	}
	for _, id := range append(slices.Clone(a.JobRefs), a.AllocRefs...) {
		if id == "" || len(id) > 256 {
			return fmt.Errorf("%w: JobRefs/AllocRefs: an ID is empty or over 256 bytes", ErrInvalid)
		}
	}
	for _, ref := range a.JobRefs {
		if _, _, ok := SplitArtifactJobRef(ref); !ok {
			return fmt.Errorf("%w: JobRefs: %q is not \"<namespace>/<job-id>\"", ErrInvalid, ref)
		}
	}
	return nil
}

// ArtifactRef is one file of an allocation's outputs.
type ArtifactRef struct {
	// Path is relative to the output directory, slash-separated.
	Path string
	// Digest is the lower-case hex SHA-256 of the file.
	Digest string
	// Size is in bytes.
	Size int64
}

// ValidArtifactDigest checks that s is a lower-case hex SHA-256 (64
// characters 0-9a-f). Errors wrap ErrInvalid and name field.
func ValidArtifactDigest(field, s string) error {
	if len(s) != 64 {
		return fmt.Errorf("%w: %s: digest must be 64 lower-case hex characters (SHA-256), got %d characters", ErrInvalid, field, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%w: %s: digest must be lower-case hex (SHA-256), found %q at %d", ErrInvalid, field, c, i)
		}
	}
	return nil
}

// ParseArtifactRef returns the hex digest of an artifact reference
// "artifact://sha256/<hex>". A bare 64-character hex digest is accepted
// too (the CLI takes either). Errors wrap ErrInvalid: another scheme or
// algorithm, or a digest that is not 64 lower-case hex characters.
func ParseArtifactRef(s string) (string, error) {
	hex := s
	if strings.Contains(s, "://") {
		if !strings.HasPrefix(s, ArtifactRefPrefix) {
			return "", fmt.Errorf("%w: artifact reference %q: want %s<hex>", ErrInvalid, s, ArtifactRefPrefix)
		}
		hex = strings.TrimPrefix(s, ArtifactRefPrefix)
	}
	if err := ValidArtifactDigest("artifact reference", hex); err != nil {
		return "", err
	}
	return hex, nil
}

// ArtifactUpsertRequest commits artifact metadata. For a digest already
// stored the FSM keeps CreateIndex, CreateTime, Size, MediaType and
// UploadedBy and adds the new JobRefs and AllocRefs to the old ones (a
// second upload of the same bytes only adds references).
type ArtifactUpsertRequest struct {
	Artifacts []*Artifact
}

// ArtifactDeleteRequest removes artifact metadata (retention, see
// server/core_gc.go). Each removal is conditional: it happens only while
// the stored artifact still has the ModifyIndex the leader saw, so one
// referenced again meanwhile stays.
type ArtifactDeleteRequest struct {
	Artifacts []*ArtifactDelete
}

// ArtifactDelete names one artifact to delete and the ModifyIndex it must
// still have.
type ArtifactDelete struct {
	Digest      string
	ModifyIndex uint64
}
