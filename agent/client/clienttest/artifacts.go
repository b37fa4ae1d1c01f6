package clienttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"

	"github.com/gpulayer/gpulayer/structs"
)

// Blobs is an in-memory artifact store that hashes every upload and
// refuses one whose bytes do not match its digest, as the servers do.
// It serves the client's ArtifactConn calls directly and the contract's
// HTTP routes through Handler. Safe for concurrent use.
type Blobs struct {
	mu    sync.Mutex
	blobs map[string][]byte
	refs  map[string][]string // digest -> alloc IDs
	puts  int
}

// NewBlobs returns an empty store.
func NewBlobs() *Blobs { return &Blobs{blobs: map[string][]byte{}, refs: map[string][]string{}} }

// Add stores b and returns its hex digest.
func (b *Blobs) Add(data []byte) string {
	h := sha256.Sum256(data)
	d := hex.EncodeToString(h[:])
	b.mu.Lock()
	b.blobs[d] = append([]byte(nil), data...)
	b.mu.Unlock()
	return d
}

// Blob returns the stored bytes of d.
func (b *Blobs) Blob(d string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.blobs[d]
	return v, ok
}

// Corrupt replaces the stored bytes of d without changing its key.
func (b *Blobs) Corrupt(d string, data []byte) {
	b.mu.Lock()
	b.blobs[d] = data
	b.mu.Unlock()
}

// Puts counts the blobs uploaded.
func (b *Blobs) Puts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.puts
}

// ArtifactsMissing returns those of digests not stored.
func (b *Blobs) ArtifactsMissing(ctx context.Context, nodeID string, digests []string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, d := range digests {
		if _, ok := b.blobs[d]; !ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// ArtifactPut stores what r holds under d when it hashes to d.
func (b *Blobs) ArtifactPut(ctx context.Context, nodeID, d string, r io.Reader, size int64, mediaType, jobID, allocID string) error {
	data, err := io.ReadAll(io.LimitReader(r, 1<<30))
	if err != nil {
		return err
	}
	h := sha256.Sum256(data)
	if got := hex.EncodeToString(h[:]); got != d {
		return fmt.Errorf("%w: body hashes to %s, not %s", structs.ErrInvalid, got, d)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.blobs[d]; !ok {
		b.blobs[d] = data
		b.puts++
	}
	b.refs[d] = append(b.refs[d], allocID)
	return nil
}

// ArtifactGet streams the stored bytes of d.
func (b *Blobs) ArtifactGet(ctx context.Context, nodeID, d string) (io.ReadCloser, error) {
	data, ok := b.Blob(d)
	if !ok {
		return nil, fmt.Errorf("artifact %s: %w", d, structs.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

var blobPath = regexp.MustCompile(`^/v1/artifact/sha256/([0-9a-f]{64})$`)

// Handler serves the contract's routes over b: POST /v1/artifacts/missing,
// PUT and GET /v1/artifact/sha256/{hex}. Each request must carry
// X-Gpulayer-Node-Secret equal to secret and ?node=nodeID (403 else).
func (b *Blobs) Handler(nodeID, secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(structs.HeaderNodeSecret) != secret || r.URL.Query().Get("node") != nodeID {
			http.Error(w, `{"error":"Permission denied"}`, http.StatusForbidden)
			return
		}
		if r.URL.Path == "/v1/artifacts/missing" && r.Method == http.MethodPost {
			var in struct{ Digests []string }
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Digests) > 10000 {
				http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
				return
			}
			m, _ := b.ArtifactsMissing(r.Context(), nodeID, in.Digests)
			if m == nil {
				m = []string{}
			}
			json.NewEncoder(w).Encode(map[string][]string{"Missing": m})
			return
		}
		sm := blobPath.FindStringSubmatch(r.URL.Path)
		if sm == nil {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodPut:
			if err := b.ArtifactPut(r.Context(), nodeID, sm[1], r.Body, r.ContentLength, r.URL.Query().Get("media_type"), r.URL.Query().Get("job"), r.URL.Query().Get("alloc")); err != nil {
				http.Error(w, `{"error":"digest mismatch"}`, http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"Digest": sm[1]})
		case http.MethodGet:
			data, ok := b.Blob(sm[1])
			if !ok {
				http.Error(w, `{"error":"artifact not found"}`, http.StatusNotFound)
				return
			}
			w.Header().Set("X-Gpulayer-Digest", sm[1])
			w.Write(data)
		default:
			http.Error(w, "method", http.StatusMethodNotAllowed)
		}
	})
}
