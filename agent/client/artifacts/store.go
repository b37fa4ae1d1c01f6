// Package artifacts moves a task's files between the client and the
// servers' content-addressed artifact store: it fetches inputs
// (artifact://sha256/<hex> from the servers, https:// with a sha256
// checksum) into a per-client cache keyed by digest, verifies them, and
// writes or unpacks them beneath the task directory only; after the task
// it collects the task's output directory and uploads what the store
// lacks; and it packs the tasks' rotated logs into a deterministic tar.
//
// No go-getter: its history of path-escape advisories (symlinks and ".."
// in archives, git and hg option injection) is why every write here goes
// through an os.Root opened on the task directory and every tar entry is
// checked before anything is written.
package artifacts

import (
	"context"
	"errors"
	"io"
)

// Store is what this package needs of the servers' artifact store (the
// contract's routes: POST /v1/artifacts/missing, PUT and GET
// /v1/artifact/sha256/{hex}). The client agent implements it over its
// server connection (node secret authentication) or in-process in dev
// mode. Digests are lower-case hex SHA-256 (64 characters).
type Store interface {
	// Missing returns those of digests the store does not hold.
	Missing(ctx context.Context, digests []string) ([]string, error)
	// Put uploads size bytes read from r under hex; the store checks the
	// digest and refuses a mismatch. mediaType is
	// "application/octet-stream" or "application/x-tar"; allocID and
	// jobID are recorded as references.
	Put(ctx context.Context, hex string, r io.Reader, size int64, mediaType, jobID, allocID string) error
	// Get streams the blob hex. It returns an error wrapping
	// ErrNotFound when the store does not have it.
	Get(ctx context.Context, hex string) (io.ReadCloser, error)
}

// Errors returned by this package, wrapped with detail.
var (
	// ErrNotFound: the store does not have the blob.
	ErrNotFound = errors.New("artifact not found")
	// ErrChecksum: fetched bytes do not hash to the expected digest.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrUnsafeEntry: an archive entry or output file that would escape
	// the destination or is not a plain file or directory.
	ErrUnsafeEntry = errors.New("refused an unsafe entry")
	// ErrTooLarge: a download, archive or output directory over a limit.
	ErrTooLarge = errors.New("over a size limit")
	// ErrNoStore: the client has no artifact store (its servers do not
	// serve artifacts).
	ErrNoStore = errors.New("no artifact store is configured")
)

// Media types of blobs.
const (
	MediaTypeFile = "application/octet-stream"
	MediaTypeTar  = "application/x-tar"
)
