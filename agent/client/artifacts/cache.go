package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Defaults of a Cache.
const (
	// DefaultMaxFetchBytes bounds one fetched blob: 8 GiB.
	DefaultMaxFetchBytes = 8 << 30
	// DefaultHTTPSTimeout bounds one https download, headers to last byte.
	DefaultHTTPSTimeout = 30 * time.Minute
)

// Cache keeps verified blobs of one client under Dir/<hex> (Dir is
// <data-dir>/client/artifact-cache/sha256, the agent's own, mode 0700).
// A blob is written to a temporary file, hashed while written, and
// renamed into place only when its digest matches; it is hashed again
// every time it is used. Safe for concurrent use.
type Cache struct {
	// Dir holds the blobs. Required.
	Dir string
	// Store serves artifact:// sources; nil refuses them with ErrNoStore.
	Store Store
	// HTTP fetches https sources; nil means a client with HTTPSTimeout.
	HTTP *http.Client
	// HTTPSTimeout bounds one https download; zero means
	// DefaultHTTPSTimeout.
	HTTPSTimeout time.Duration
	// MaxBytes bounds one blob in bytes; zero means DefaultMaxFetchBytes.
	MaxBytes int64
	// MaxCacheBytes bounds the whole cache (Prune); zero means
	// DefaultCacheMaxBytes.
	MaxCacheBytes int64
}

func (c *Cache) maxBytes() int64 {
	if c.MaxBytes > 0 {
		return c.MaxBytes
	}
	return DefaultMaxFetchBytes
}

// Open returns the verified blob of the artifact a, fetching it into the
// cache first when it is not there. The file is positioned at its start
// and was hashed through on this descriptor, so what the caller reads is
// what was verified (the cache directory is the agent's alone). Errors
// wrap ErrChecksum, ErrTooLarge, ErrNotFound or ErrNoStore.
func (c *Cache) Open(ctx context.Context, a *structs.TaskArtifact) (*os.File, error) {
	want, err := a.Digest()
	if err != nil {
		return nil, err
	}
	if f, err := c.openVerified(want); err == nil {
		c.touch(want)
		return f, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		// A corrupt cached blob is dropped and fetched again.
		_ = os.Remove(filepath.Join(c.Dir, want))
	}
	if err := c.fetch(ctx, a, want); err != nil {
		return nil, err
	}
	c.Prune(want)
	return c.openVerified(want)
}

// openVerified opens Dir/<want> and hashes it through.
func (c *Cache) openVerified(want string) (*os.File, error) {
	f, err := os.Open(filepath.Join(c.Dir, want))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		f.Close()
		return nil, fmt.Errorf("%w: cached blob %s hashes to %s", ErrChecksum, want, got)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fetch downloads the source into the cache under want.
func (c *Cache) fetch(ctx context.Context, a *structs.TaskArtifact, want string) error {
	var body io.ReadCloser
	switch {
	case strings.HasPrefix(a.GetterSource, "artifact://"):
		if c.Store == nil {
			return fmt.Errorf("%s: %w", a.GetterSource, ErrNoStore)
		}
		rc, err := c.Store.Get(ctx, want)
		if err != nil {
			return fmt.Errorf("get %s from the servers: %w", a.GetterSource, err)
		}
		body = rc
	case strings.HasPrefix(a.GetterSource, "https://"):
		timeout := c.HTTPSTimeout
		if timeout <= 0 {
			timeout = DefaultHTTPSTimeout
		}
		hc := c.HTTP
		if hc == nil {
			hc = &http.Client{Timeout: timeout}
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, a.GetterSource, nil)
		if err != nil {
			return fmt.Errorf("source %q: %w", a.GetterSource, err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("download %s: %w", a.GetterSource, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("download %s: %s", a.GetterSource, resp.Status)
		}
		if resp.ContentLength > c.maxBytes() {
			resp.Body.Close()
			return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, a.GetterSource, resp.ContentLength, c.maxBytes())
		}
		body = resp.Body
	default:
		return fmt.Errorf("source %q: unknown scheme", a.GetterSource)
	}
	defer body.Close()
	return c.write(body, want, a.GetterSource)
}

// write streams r into a temporary file in Dir, hashing as it goes, and
// renames it to Dir/<want> when the digest matches.
func (c *Cache) write(r io.Reader, want, source string) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	max := c.maxBytes()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, max+1))
	if err != nil {
		tmp.Close()
		return fmt.Errorf("download %s: %w", source, err)
	}
	if n > max {
		tmp.Close()
		return fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, source, max)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		tmp.Close()
		return fmt.Errorf("%w: %s: got sha256:%s, want sha256:%s", ErrChecksum, source, got, want)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(c.Dir, want))
}
