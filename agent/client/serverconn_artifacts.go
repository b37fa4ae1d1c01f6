package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

var _ ArtifactConn = (*HTTPServerConn)(nil)

// SetNodeSecret makes calls for nodeID carry secret (NodeRegister does
// this for a connection that registers the node; an artifact-only
// connection is told).
func (c *HTTPServerConn) SetNodeSecret(nodeID, secret string) {
	c.mu.Lock()
	c.secrets[nodeID] = secret
	c.mu.Unlock()
}

// maxMissingDigests is the contract's bound on one missing query.
const maxMissingDigests = 10_000

// ArtifactsMissing implements ArtifactConn: POST /v1/artifacts/missing
// {"Digests": [...]} answered {"Missing": [...]}, in batches of at most
// 10,000 digests, authenticated with the node's secret (?node=<id>).
func (c *HTTPServerConn) ArtifactsMissing(ctx context.Context, nodeID string, digests []string) ([]string, error) {
	var out []string
	for start := 0; start < len(digests); start += maxMissingDigests {
		end := min(start+maxMissingDigests, len(digests))
		var resp struct{ Missing []string }
		params := url.Values{"node": {nodeID}}
		if _, err := c.call(ctx, http.MethodPost, "/v1/artifacts/missing", params, nodeID, struct{ Digests []string }{digests[start:end]}, &resp, 0); err != nil {
			return nil, fmt.Errorf("artifacts missing: %w", err)
		}
		out = append(out, resp.Missing...)
	}
	return out, nil
}

// ArtifactPut implements ArtifactConn: PUT /v1/artifact/sha256/{hex}
// with the raw bytes streamed (Content-Length size) and
// ?node=&media_type=&job=&alloc=. A stream cannot be replayed, so it goes
// to one server: the one that answered last.
func (c *HTTPServerConn) ArtifactPut(ctx context.Context, nodeID, hex string, r io.Reader, size int64, mediaType, jobID, allocID string) error {
	if !structs.ValidDigest(hex) {
		return fmt.Errorf("artifact put: %w: digest %q is not 64 hex digits", structs.ErrInvalid, hex)
	}
	params := url.Values{"node": {nodeID}, "media_type": {mediaType}}
	if jobID != "" {
		params.Set("job", jobID)
	}
	if allocID != "" {
		params.Set("alloc", allocID)
	}
	resp, err := c.stream(ctx, http.MethodPut, "/v1/artifact/sha256/"+hex, params, nodeID, r, size)
	if err != nil {
		return fmt.Errorf("artifact put %s: %w", hex, err)
	}
	resp.Body.Close()
	return nil
}

// ArtifactGet implements ArtifactConn: GET /v1/artifact/sha256/{hex},
// streamed. An unknown digest gives an error wrapping structs.ErrNotFound.
// The caller verifies the bytes (artifacts.Cache does).
func (c *HTTPServerConn) ArtifactGet(ctx context.Context, nodeID, hex string) (io.ReadCloser, error) {
	if !structs.ValidDigest(hex) {
		return nil, fmt.Errorf("artifact get: %w: digest %q is not 64 hex digits", structs.ErrInvalid, hex)
	}
	resp, err := c.stream(ctx, http.MethodGet, "/v1/artifact/sha256/"+hex, url.Values{"node": {nodeID}}, nodeID, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("artifact get %s: %w", hex, err)
	}
	return resp.Body, nil
}

// stream sends one request with a streamed body (nil for none) to the
// current server, or for a GET to each server in turn while they fail
// with a transport error or 5xx. It returns a 2xx response whose body the
// caller closes; no request timeout applies beyond ctx (blobs are large).
func (c *HTTPServerConn) stream(ctx context.Context, method, path string, params url.Values, nodeID string, body io.Reader, size int64) (*http.Response, error) {
	c.mu.Lock()
	start := c.current
	secret := c.secrets[nodeID]
	n := len(c.servers)
	c.mu.Unlock()
	tries := n
	if body != nil {
		tries = 1
	}
	var lastErr error
	for i := 0; i < tries; i++ {
		idx := (start + i) % n
		base := c.servers[idx]
		// A failed server is skipped by the next call (a streamed upload
		// is retried by its caller, which can reopen its file).
		fail := func() {
			c.mu.Lock()
			if c.current == idx {
				c.current = (idx + 1) % n
			}
			c.mu.Unlock()
		}
		u := *base
		u.Path = path
		u.RawQuery = params.Encode()
		req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.ContentLength = size
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		if secret != "" {
			req.Header.Set(structs.HeaderNodeSecret, secret)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			lastErr = fmt.Errorf("%s %s%s: %w", method, base.Host, path, err)
			fail()
			continue
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		msg := strings.TrimSpace(string(raw))
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
		lastErr = fmt.Errorf("%s %s%s: %d: %w", method, base.Host, path, resp.StatusCode, statusSentinel(resp.StatusCode, msg))
		if resp.StatusCode < 500 {
			return nil, lastErr
		}
		fail()
	}
	return nil, lastErr
}
