package http

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gpulayer/gpulayer/server/artifacts"
	"github.com/gpulayer/gpulayer/structs"
)

// DefaultMaxArtifactBytes caps one artifact upload when
// Config.MaxArtifactBytes is zero: 8 GiB. The body streams to disk (never
// whole in memory), so the cap bounds disk use; the general 1 MiB body
// cap does not apply to uploads.
const DefaultMaxArtifactBytes int64 = 8 << 30

// HeaderArtifactDigest carries the hex SHA-256 of a downloaded artifact.
const HeaderArtifactDigest = "X-Gpulayer-Digest"

// HeaderArtifactReplica marks a server-to-server artifact request: a GET
// so marked is answered from the server's own store only (404 when it
// lacks the blob, no pull from a third server).
const HeaderArtifactReplica = "X-Gpulayer-Replica"

// ArtifactServer is what the artifact routes need from a server;
// *server.Server implements it. When Config.Server implements it the
// handler serves
//
//	POST /v1/artifacts/missing              {"Digests": [hex...]} → {"Missing": [hex...]} (at most 10,000)
//	PUT  /v1/artifact/sha256/{hex}          upload the raw bytes (?media_type=&job=&alloc=&node=) → Artifact
//	PUT  /v1/artifact/sha256/{hex}/replica  a server's push of a blob it stored (bytes only, no metadata)
//	GET  /v1/artifact/sha256/{hex}          the bytes, verified while streaming
//	GET  /v1/artifact/sha256/{hex}/meta     Artifact
//	GET  /v1/artifacts                      the artifacts the caller may read
type ArtifactServer interface {
	ArtifactStore() *artifacts.Store
	ArtifactUpsert(ctx context.Context, a *structs.Artifact) (*structs.Artifact, error)
	ArtifactGet(ctx context.Context, digest string, q *structs.QueryOptions) (*structs.Artifact, structs.QueryMeta, error)
	ArtifactList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Artifact, structs.QueryMeta, error)
	ArtifactsMissing(digests []string) ([]string, error)
	// ArtifactPeers returns the HTTP addresses ("host:port") of the
	// other live servers, where blobs are pushed and pulled.
	ArtifactPeers() []string
}

// ArtifactsMissingRequest is the body of POST /v1/artifacts/missing.
type ArtifactsMissingRequest struct {
	Digests []string
}

// ArtifactsMissingResponse lists the digests the cluster has no artifact
// for, in the order asked.
type ArtifactsMissingResponse struct {
	Missing []string
}

// artifactRoutes registers the artifact routes when the server has a
// store.
func (h *handler) artifactRoutes() {
	as, ok := h.srv.(ArtifactServer)
	if !ok {
		return
	}
	h.arts = as
	h.artRepl = newReplicator(h)
	h.handle("POST /v1/artifacts/missing", h.artifactsMissing)
	h.handle("PUT /v1/artifact/sha256/{hex}", h.artifactPut)
	h.handle("PUT /v1/artifact/sha256/{hex}/replica", h.artifactReplica)
	h.mux.HandleFunc("GET /v1/artifact/sha256/{hex}", h.artifactGet)
	h.handle("GET /v1/artifact/sha256/{hex}/meta", h.artifactMeta)
	h.handle("GET /v1/artifacts", h.artifactList)
}

func (h *handler) maxArtifact() int64 {
	if h.maxArtifactBytes > 0 {
		return h.maxArtifactBytes
	}
	return DefaultMaxArtifactBytes
}

// pathDigest returns the {hex} path value after checking it.
func pathDigest(r *http.Request) (string, error) {
	d := r.PathValue("hex")
	if err := structs.ValidArtifactDigest("path digest", d); err != nil {
		return "", err
	}
	return d, nil
}

func (h *handler) artifactsMissing(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	var req ArtifactsMissingRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	missing, err := h.arts.ArtifactsMissing(req.Digests)
	if err != nil {
		return nil, err
	}
	return &ArtifactsMissingResponse{Missing: missing}, nil
}

// uploadBody returns r's body bounded by the artifact cap, answering 413
// at once for a Content-Length over it.
func (h *handler) uploadBody(r *http.Request) (io.Reader, error) {
	max := h.maxArtifact()
	if r.ContentLength > max {
		return nil, &codedError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("artifact of %d bytes is over the limit of %d bytes (limits.artifact_max_bytes)", r.ContentLength, max)}
	}
	return r.Body, nil
}

// storeErr maps the store's errors to the API's.
func storeErr(err error) error {
	switch {
	case errors.Is(err, artifacts.ErrTooLarge):
		return &codedError{code: http.StatusRequestEntityTooLarge, msg: err.Error()}
	case errors.Is(err, artifacts.ErrDigestMismatch):
		return badRequest("%v (nothing stored)", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("body: ended before its Content-Length: %v (nothing stored)", err)
	}
	return err
}

// artifactPut uploads an artifact: on the leader (followers forward the
// request), the bytes are stored (verified against {hex}), pushed to the
// other live servers, of which at least one must confirm, and only then
// is the metadata committed through Raft and the upload acknowledged. A
// digest already committed is not stored again: the caller may then send
// no body when it may read the artifact already, and must send the bytes
// (which are hashed, not stored) otherwise, before its ?job= or ?alloc=
// reference is added.
func (h *handler) artifactPut(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	digest, err := pathDigest(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	meta := &structs.Artifact{Digest: digest, MediaType: q.Get("media_type"), UploadedBy: h.uploader(r)}
	if meta.MediaType == "" {
		meta.MediaType = structs.ArtifactMediaFile
	}
	if id := q.Get("alloc"); id != "" {
		if err := h.checkAllocRef(r, id); err != nil {
			return nil, err
		}
		meta.AllocRefs = []string{id}
	}
	if id := q.Get("job"); id != "" {
		ref, err := h.artifactJobRef(r, id, q.Get("alloc"))
		if err != nil {
			return nil, err
		}
		meta.JobRefs = []string{ref}
	}
	if err := meta.Validate(); err != nil {
		return nil, err
	}
	body, err := h.uploadBody(r)
	if err != nil {
		return nil, err
	}
	store := h.arts.ArtifactStore()
	existing, _, err := h.arts.ArtifactGet(r.Context(), digest, &structs.QueryOptions{AllowStale: true})
	if err != nil && !errors.Is(err, structs.ErrNotFound) {
		return nil, err
	}
	if existing != nil {
		if !h.artifactReadable(r, existing) {
			if err := proveBytes(body, digest, h.maxArtifact()); err != nil {
				return nil, err
			}
		} else if has, _, _ := store.Has(digest); !has && r.ContentLength != 0 {
			// The metadata is here but this server lost the blob: keep the
			// bytes sent (repair); a mismatch changes nothing.
			if _, _, err := store.Put(digest, body, h.maxArtifact()); err != nil {
				return nil, storeErr(err)
			}
		}
		if refsKnown(existing, meta) {
			return existing, nil
		}
		meta.Size = existing.Size
		return h.arts.ArtifactUpsert(r.Context(), meta)
	}
	size, _, err := store.Put(digest, body, h.maxArtifact())
	if err != nil {
		return nil, storeErr(err)
	}
	meta.Size = size
	if err := h.artRepl.push(r, digest, size); err != nil {
		return nil, err
	}
	return h.arts.ArtifactUpsert(r.Context(), meta)
}

// refsKnown reports whether every reference of add is in a already.
func refsKnown(a, add *structs.Artifact) bool {
	for _, id := range add.JobRefs {
		if !contains(a.JobRefs, id) {
			return false
		}
	}
	for _, id := range add.AllocRefs {
		if !contains(a.AllocRefs, id) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// proveBytes hashes body (at most max bytes) and returns a 400 error
// unless it is the artifact's content.
func proveBytes(body io.Reader, digest string, max int64) error {
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(body, max+1), make([]byte, 1<<20))
	if err != nil {
		return badRequest("reading the artifact body: %v", err)
	}
	if n > max {
		return &codedError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("artifact over the limit of %d bytes", max)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return badRequest("artifact %s is stored but this token may not read it: send its bytes to add a reference (the %d bytes sent hash to %s)", digest, n, got)
	}
	return nil
}

// checkAllocRef refuses an ?alloc= reference a node caller does not run,
// or one a token may not submit-job in the namespace of.
func (h *handler) checkAllocRef(r *http.Request, id string) error {
	if !h.aclEnabled {
		return nil
	}
	al, _, err := h.srv.AllocGet(r.Context(), id, &structs.QueryOptions{AllowStale: true})
	if err != nil || al == nil {
		return fmt.Errorf("alloc %q: %w", id, structs.ErrNotFound)
	}
	if c := callerFrom(r); c.nodeID != "" {
		if al.NodeID != c.nodeID {
			return errPermissionDenied
		}
		return nil
	}
	acl, _ := aclFrom(r)
	if !acl.AllowNamespaceOp(allocNamespace(al), structs.NamespaceCapabilitySubmitJob) {
		return errPermissionDenied
	}
	return nil
}

// artifactReplica stores a blob another server pushed (verified against
// {hex}); it commits nothing, the pushing server does. 200 with the size.
// With ACLs on only a server (its TLS certificate, isServerPeer) or a
// management token may push: a blob pushed here has no metadata, so any
// other caller could only leave orphans (403).
func (h *handler) artifactReplica(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	if h.aclEnabled && !callerFrom(r).server && !managementToken(r) {
		return nil, errPermissionDenied
	}
	digest, err := pathDigest(r)
	if err != nil {
		return nil, err
	}
	body, err := h.uploadBody(r)
	if err != nil {
		return nil, err
	}
	size, _, err := h.arts.ArtifactStore().Put(digest, body, h.maxArtifact())
	if err != nil {
		return nil, storeErr(err)
	}
	return map[string]interface{}{"Digest": digest, "Size": size}, nil
}

// readableArtifact returns the metadata of {hex} when the caller may read
// it: 404 for an unknown digest, 403 for a caller who may not.
func (h *handler) readableArtifact(r *http.Request) (*structs.Artifact, error) {
	digest, err := pathDigest(r)
	if err != nil {
		return nil, err
	}
	a, _, err := h.arts.ArtifactGet(r.Context(), digest, &structs.QueryOptions{AllowStale: true})
	if err != nil {
		return nil, err
	}
	if !h.artifactReadable(r, a) {
		return nil, errPermissionDenied
	}
	return a, nil
}

func (h *handler) artifactMeta(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	return h.readableArtifact(r)
}

func (h *handler) artifactList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	q.AllowStale = true
	list, meta, err := h.arts.ArtifactList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	out := make([]*structs.Artifact, 0, len(list))
	for _, a := range list {
		if h.artifactReadable(r, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// artifactGet streams an artifact's bytes. A server that lacks the blob,
// or finds it corrupt when it opens it, pulls it from another server
// first (verified) unless the request is itself a server's pull. A blob
// found corrupt while streaming (after the first bytes went out) is
// removed, the stream is cut before its last VerifyTail bytes (the client
// sees a truncated body, never a whole bad one), and the blob is repaired
// from another server in the background.
func (h *handler) artifactGet(w http.ResponseWriter, r *http.Request) {
	a, err := h.readableArtifact(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	store := h.arts.ArtifactStore()
	replica := r.Header.Get(HeaderArtifactReplica) != ""
	rd, err := store.Open(a.Digest, a.Size)
	if errors.Is(err, artifacts.ErrCorrupt) {
		h.logger.Error("artifact blob corrupt on disk; removing it", "digest", a.Digest, "error", err)
		_ = store.Remove(a.Digest)
		err = artifacts.ErrNotFound
	}
	if errors.Is(err, artifacts.ErrNotFound) && !replica {
		if perr := h.artRepl.pull(r.Context(), r, a); perr != nil {
			h.writeError(w, r, fmt.Errorf("artifact %s: not on this server and no other server could provide it: %v: %w", a.Digest, perr, structs.ErrNotReady))
			return
		}
		rd, err = store.Open(a.Digest, a.Size)
	}
	if err != nil {
		h.writeError(w, r, fmt.Errorf("artifact %s: %w", a.Digest, err))
		return
	}
	defer rd.Close()
	cw := &countingWriter{w: w}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(a.Size, 10))
	w.Header().Set(HeaderArtifactDigest, a.Digest)
	_, err = io.CopyBuffer(cw, rd, make([]byte, 1<<20))
	if err == nil || !errors.Is(err, artifacts.ErrCorrupt) {
		return // success, or the caller went away
	}
	h.logger.Error("artifact blob corrupt on disk; removing it and repairing from another server", "digest", a.Digest, "error", err)
	_ = store.Remove(a.Digest)
	if !replica {
		h.artRepl.repairLater(r, a)
	}
	if cw.n == 0 {
		w.Header().Del("Content-Length")
		h.writeError(w, r, fmt.Errorf("artifact %s: %w (removed; it is being repaired from another server, retry)", a.Digest, err))
		return
	}
	// The status and some bytes are out: cut the connection so the body
	// ends short of its Content-Length.
	panic(http.ErrAbortHandler)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// artifactPeerTimeout bounds one push or pull of a blob between servers
// when the request has no deadline of its own: an hour.
const artifactPeerTimeout = time.Hour
