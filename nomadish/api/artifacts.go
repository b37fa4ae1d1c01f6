package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ArtifactRefPrefix starts an artifact reference: artifact://sha256/<hex>.
const ArtifactRefPrefix = "artifact://sha256/"

// Artifact media types.
const (
	ArtifactMediaFile = "application/octet-stream"
	ArtifactMediaTar  = "application/x-tar"
)

// Artifact is the metadata of a stored artifact (GET
// /v1/artifact/sha256/{hex}/meta).
type Artifact struct {
	Digest      string
	Size        int64
	MediaType   string
	CreateTime  int64 // Unix nanoseconds
	ModifyTime  int64 // Unix nanoseconds
	UploadedBy  string
	JobRefs     []string
	AllocRefs   []string
	CreateIndex uint64
	ModifyIndex uint64
}

// ArtifactPutOptions tune an upload; all optional.
type ArtifactPutOptions struct {
	// MediaType defaults to ArtifactMediaFile on the server.
	MediaType string
	// Job and Alloc add a reference to the artifact (retention keeps a
	// referenced artifact; readers of the job may read it).
	Job, Alloc string
	// Namespace is the namespace of the upload when Job is not set.
	Namespace string
	// Node and NodeSecret authenticate a client node's upload instead of
	// the client's token.
	Node, NodeSecret string
}

// ErrArtifactDigest is returned (wrapped) by a Get reader whose bytes do
// not hash to the digest asked for, and by ParseArtifactRef.
var ErrArtifactDigest = errors.New("artifact digest mismatch")

// ParseArtifactRef returns the hex digest of "artifact://sha256/<hex>" or
// of a bare 64-character lower-case hex digest.
func ParseArtifactRef(s string) (string, error) {
	h := strings.TrimPrefix(s, ArtifactRefPrefix)
	if strings.Contains(h, "://") || len(h) != 64 {
		return "", fmt.Errorf("%w: %q is not %s<64 hex digits>", ErrArtifactDigest, s, ArtifactRefPrefix)
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", fmt.Errorf("%w: %q: the digest must be lower-case hex", ErrArtifactDigest, s)
		}
	}
	return h, nil
}

// Artifacts is the artifact API.
type Artifacts struct{ c *Client }

// Artifacts returns the artifact API.
func (c *Client) Artifacts() *Artifacts { return &Artifacts{c: c} }

// Missing returns the digests (at most 10,000) the cluster does not hold,
// in the order given (POST /v1/artifacts/missing).
func (a *Artifacts) Missing(digests []string) ([]string, error) {
	var out struct{ Missing []string }
	if _, err := a.c.write(http.MethodPost, "/v1/artifacts/missing", nil, map[string][]string{"Digests": digests}, &out, nil); err != nil {
		return nil, err
	}
	return out.Missing, nil
}

// Put uploads size bytes read from r under digest (PUT
// /v1/artifact/sha256/{hex}); size -1 means unknown (chunked). The server
// verifies the digest and answers 400 on a mismatch. A nil r sends no
// body: that adds the options' references to an artifact the caller may
// already read.
func (a *Artifacts) Put(ctx context.Context, digest string, r io.Reader, size int64, opts *ArtifactPutOptions) (*Artifact, error) {
	params := url.Values{}
	if opts == nil {
		opts = &ArtifactPutOptions{}
	}
	for k, v := range map[string]string{"media_type": opts.MediaType, "job": opts.Job, "alloc": opts.Alloc, "namespace": opts.Namespace, "node": opts.Node} {
		if v != "" {
			params.Set(k, v)
		}
	}
	req, err := a.c.newRequest(ctx, http.MethodPut, "/v1/artifact/sha256/"+url.PathEscape(digest), params, nil)
	if err != nil {
		return nil, err
	}
	if r != nil {
		req.Body = io.NopCloser(r)
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	} else {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if opts.NodeSecret != "" {
		req.Header.Set("X-Gpulayer-Node-Secret", opts.NodeSecret)
	}
	resp, err := a.c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out Artifact
	if err := decodeJSON(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("decode response of PUT artifact: %w", err)
	}
	return &out, nil
}

// Get streams the artifact's bytes; the caller closes the reader. The
// reader hashes what it reads and its last Read returns an error wrapping
// ErrArtifactDigest, instead of io.EOF, when the bytes do not hash to
// digest or end early; write to a temporary file and keep it only after
// io.EOF.
func (a *Artifacts) Get(ctx context.Context, digest string) (io.ReadCloser, error) {
	return a.GetAs(ctx, digest, "", "")
}

// GetAs is Get with a node's credentials (node ID and secret) instead of
// the client's token; empty node means the token.
func (a *Artifacts) GetAs(ctx context.Context, digest, node, nodeSecret string) (io.ReadCloser, error) {
	params := url.Values{}
	if node != "" {
		params.Set("node", node)
	}
	req, err := a.c.newRequest(ctx, http.MethodGet, "/v1/artifact/sha256/"+url.PathEscape(digest), params, nil)
	if err != nil {
		return nil, err
	}
	if nodeSecret != "" {
		req.Header.Set("X-Gpulayer-Node-Secret", nodeSecret)
	}
	resp, err := a.c.do(req)
	if err != nil {
		return nil, err
	}
	size := int64(-1)
	if cl := resp.Header.Get("Content-Length"); cl != "" {
		size, _ = strconv.ParseInt(cl, 10, 64)
	}
	return &verifyingReader{rc: resp.Body, want: digest, size: size, h: sha256.New()}, nil
}

// Info returns the artifact's metadata (GET .../meta).
func (a *Artifacts) Info(digest string) (*Artifact, error) {
	var out Artifact
	if _, err := a.c.query("/v1/artifact/sha256/"+url.PathEscape(digest)+"/meta", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns the artifacts the caller may read, sorted by digest.
func (a *Artifacts) List() ([]*Artifact, error) {
	var out []*Artifact
	if _, err := a.c.query("/v1/artifacts", &out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// verifyingReader hashes a download and fails its end on a mismatch.
type verifyingReader struct {
	rc   io.ReadCloser
	want string
	size int64
	n    int64
	h    interface {
		io.Writer
		Sum([]byte) []byte
	}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if errors.Is(err, io.EOF) {
		if v.size >= 0 && v.n != v.size {
			return n, fmt.Errorf("%w: %s: got %d of %d bytes", ErrArtifactDigest, v.want, v.n, v.size)
		}
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("%w: the bytes received hash to %s, not %s", ErrArtifactDigest, got, v.want)
		}
	} else if err != nil {
		return n, fmt.Errorf("%w: %s: download cut after %d bytes: %v", ErrArtifactDigest, v.want, v.n, err)
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.rc.Close() }

func decodeJSON(r io.Reader, out interface{}) error { return json.NewDecoder(r).Decode(out) }
