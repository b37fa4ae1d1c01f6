package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/gpulayer/gpulayer/structs"
)

// Replication of artifact blobs between servers, over the servers' HTTP
// APIs with the TLS client configuration forwarding uses (a peer must
// present a server certificate when tls.http is on). A pull carries the
// credential of the request that caused it (the reader's token or node
// secret), so the peer applies the same read rules to it and no
// server-wide secret is needed. A push is the server's own act: with
// tls.http it carries no token and the peer accepts it on the server
// certificate alone (isServerPeer); without TLS a server has no proof of
// its own, so with ACLs on it pushes only for a management caller (whose
// token the peer accepts) and otherwise leaves the copies to the other
// servers' pull on read and sync (see push).
//
//   - push: after the leader stored an upload it sends the blob to every
//     other live server (PUT .../replica) and needs one of them to confirm
//     before it commits the metadata, so an acknowledged artifact is on two
//     servers at least (all live ones, normally; not in a cluster with
//     ACLs on and no tls.http unless the uploader is management);
//   - pull: a server asked for a blob it lacks (it was down during the
//     push, or it removed a corrupt copy) fetches it from the first peer
//     that has it, verifying the digest while it stores it.
type replicator struct {
	h      *handler
	client *http.Client
	scheme string

	mu sync.Mutex
	// pulling holds a channel per digest being pulled, closed when done,
	// so concurrent readers of a missing blob pull it once.
	pulling map[string]chan struct{}
}

func newReplicator(h *handler) *replicator {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	p := &replicator{h: h, scheme: "http", pulling: map[string]chan struct{}{}}
	if h.serverTLS != nil {
		t.TLSClientConfig = h.serverTLS.Clone()
		p.scheme = "https"
	}
	p.client = &http.Client{Transport: t}
	return p
}

// credentials returns the credential headers of r, to send on with a
// server-to-server request.
func credentials(r *http.Request) http.Header {
	out := http.Header{}
	for _, k := range []string{HeaderNomadToken, "Authorization", HeaderGpulayerToken, structs.HeaderNodeSecret} {
		if v := r.Header.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	out.Set(HeaderArtifactReplica, "1")
	return out
}

// peerURL returns the URL of path on the server at addr with query q.
func (p *replicator) peerURL(addr, path string, q url.Values) string {
	u := url.URL{Scheme: p.scheme, Host: addr, Path: path, RawQuery: q.Encode()}
	return u.String()
}

// push sends the stored blob to every other live server and returns nil
// once at least one confirmed (or when there is no other server); an
// error wrapping structs.ErrNotReady (503) when none did. With ACLs on and
// no tls.http a non-management caller's upload is not pushed (nil): the
// peers take no user's push, and get the blob by pulling it when read.
func (p *replicator) push(r *http.Request, digest string, size int64) error {
	peers := p.h.arts.ArtifactPeers()
	if len(peers) == 0 {
		return nil
	}
	hdr := http.Header{}
	hdr.Set(HeaderArtifactReplica, "1")
	switch {
	case p.h.serverTLS != nil:
		// The server certificate is the credential (isServerPeer).
	case !p.h.aclEnabled:
	default:
		if !managementToken(r) {
			p.h.logger.Debug("artifact not pushed: without tls.http the other servers take only a management token's push; they pull the blob when it is read",
				"digest", digest)
			return nil
		}
		hdr = credentials(r)
	}
	q := url.Values{}
	ctx := r.Context()
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.pushOne(ctx, addr, digest, size, q, hdr)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("artifact %s: stored on this server, but no other server took a copy (%w), so it is not acknowledged: %w",
		digest, errors.Join(errs...), structs.ErrNotReady)
}

func (p *replicator) pushOne(ctx context.Context, addr, digest string, size int64, q url.Values, hdr http.Header) error {
	rd, err := p.h.arts.ArtifactStore().Open(digest, size)
	if err != nil {
		return err
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(ctx, artifactPeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.peerURL(addr, "/v1/artifact/sha256/"+digest+"/replica", q), rd)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header = hdr.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("push to %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("push to %s: %s: %s", addr, resp.Status, b)
	}
	return nil
}

// pull fetches a's blob from the first peer that has it into this
// server's store (verified). Concurrent pulls of one digest wait for the
// first. It returns the last peer's error when none had it.
func (p *replicator) pull(ctx context.Context, r *http.Request, a *structs.Artifact) error {
	return p.pullWith(ctx, credentials(r), r.URL.Query().Get("node"), a)
}

func (p *replicator) pullWith(ctx context.Context, hdr http.Header, node string, a *structs.Artifact) error {
	p.mu.Lock()
	for {
		ch, ok := p.pulling[a.Digest]
		if !ok {
			break
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if has, _, _ := p.h.arts.ArtifactStore().Has(a.Digest); has {
			return nil
		}
		// The other pull failed, or its blob is gone again (removed
		// as corrupt, or lost since): pull it ourselves rather than
		// fail a reader for a pull that was not its own.
		p.mu.Lock()
	}
	ch := make(chan struct{})
	p.pulling[a.Digest] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pulling, a.Digest)
		p.mu.Unlock()
		close(ch)
	}()
	q := url.Values{}
	if node != "" {
		q.Set("node", node)
	}
	err := errors.New("no other server known")
	for _, addr := range p.h.arts.ArtifactPeers() {
		if err = p.pullOne(ctx, addr, hdr, q, a); err == nil {
			p.h.logger.Info("artifact blob pulled from another server", "digest", a.Digest, "from", addr)
			return nil
		}
		p.h.logger.Warn("artifact pull failed", "digest", a.Digest, "from", addr, "error", err)
	}
	return err
}

func (p *replicator) pullOne(ctx context.Context, addr string, hdr http.Header, q url.Values, a *structs.Artifact) error {
	ctx, cancel := context.WithTimeout(ctx, artifactPeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.peerURL(addr, "/v1/artifact/sha256/"+a.Digest, q), nil)
	if err != nil {
		return err
	}
	req.Header = hdr.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "" && cl != strconv.FormatInt(a.Size, 10) {
		return fmt.Errorf("peer sends %s bytes, the artifact has %d", cl, a.Size)
	}
	_, _, err = p.h.arts.ArtifactStore().Put(a.Digest, resp.Body, a.Size)
	return err
}

// repairLater pulls a's blob in the background with r's credentials
// (r itself may end first).
func (p *replicator) repairLater(r *http.Request, a *structs.Artifact) {
	hdr, node := credentials(r), r.URL.Query().Get("node")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), artifactPeerTimeout)
		defer cancel()
		if err := p.pullWith(ctx, hdr, node, a); err != nil {
			p.h.logger.Warn("artifact repair failed; the next read tries again", "digest", a.Digest, "error", err)
		}
	}()
}
