package http

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// Defaults of RemoteResolverConfig.
const (
	DefaultRemoteResolverTTL     = 30 * time.Second
	DefaultRemoteResolverTimeout = 10 * time.Second
	maxRemoteResolverEntries     = 1024
	maxRemoteACLBody             = 1 << 20
)

// RemoteResolverConfig configures NewRemoteResolver.
type RemoteResolverConfig struct {
	// Servers are the servers' HTTP API addresses ("host:port" or URLs).
	// At least one is required.
	Servers []string
	// HTTPClient sends the requests; nil means a client with Timeout.
	// TLS settings go on its Transport.
	HTTPClient *http.Client
	// TTL is how long a resolved token is trusted before it is asked for
	// again; zero means DefaultRemoteResolverTTL (30 seconds). A deleted
	// token keeps working on a client-only agent for at most TTL.
	TTL time.Duration
	// Timeout bounds each request; zero means DefaultRemoteResolverTimeout.
	Timeout time.Duration
	// TLS, when set, reaches every server over HTTPS with this client
	// configuration, which must verify the server's certificate
	// ("server.<region>.gpulayer"); "host:port" and http:// addresses
	// become https. Ignored when HTTPClient is set.
	TLS *tls.Config
}

// RemoteResolver is the TokenResolver of a client-only agent, which has no
// state: it asks a server for the token (GET /v1/acl/token/self with the
// token) and its policies (GET /v1/acl/policy/{name}, which a token may
// read for its own policies), compiles them, and caches the result for TTL
// keyed by the secret's SHA-256. Refusals (403) are cached too, so a
// flood of bad tokens does not become a flood of server requests.
type RemoteResolver struct {
	servers []*url.URL
	http    *http.Client
	ttl     time.Duration
	timeout time.Duration

	mu      sync.Mutex
	entries map[[32]byte]*remoteEntry
}

type remoteEntry struct {
	acl     *structs.ACL
	token   *structs.ACLToken
	err     error
	expires time.Time
}

// NewRemoteResolver returns a resolver asking cfg.Servers. It fails for an
// empty or unparsable server list.
func NewRemoteResolver(cfg RemoteResolverConfig) (*RemoteResolver, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("remote ACL resolver: no servers")
	}
	r := &RemoteResolver{http: cfg.HTTPClient, ttl: cfg.TTL, timeout: cfg.Timeout, entries: map[[32]byte]*remoteEntry{}}
	if r.ttl <= 0 {
		r.ttl = DefaultRemoteResolverTTL
	}
	if r.timeout <= 0 {
		r.timeout = DefaultRemoteResolverTimeout
	}
	useTLS := r.http == nil && cfg.TLS != nil
	if r.http == nil {
		r.http = &http.Client{Timeout: r.timeout}
		if useTLS {
			r.http.Transport = &http.Transport{TLSClientConfig: cfg.TLS.Clone(), ForceAttemptHTTP2: true}
		}
	}
	for _, s := range cfg.Servers {
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("remote ACL resolver: server %q is not host:port or a URL", s)
		}
		if useTLS {
			u.Scheme = "https"
		}
		r.servers = append(r.servers, u)
	}
	return r, nil
}

// ResolveToken implements TokenResolver.
func (r *RemoteResolver) ResolveToken(secret string) (*structs.ACL, *structs.ACLToken, error) {
	key := sha256.Sum256([]byte(secret))
	now := time.Now()
	r.mu.Lock()
	e := r.entries[key]
	r.mu.Unlock()
	if e == nil || now.After(e.expires) {
		e = r.fetch(secret)
		e.expires = now.Add(r.ttl)
		// Errors that are not refusals (servers unreachable) are not
		// cached, so the next request tries again.
		if e.err == nil || errors.Is(e.err, structs.ErrPermissionDenied) {
			r.mu.Lock()
			if len(r.entries) >= maxRemoteResolverEntries {
				r.entries = map[[32]byte]*remoteEntry{}
			}
			r.entries[key] = e
			r.mu.Unlock()
		}
	}
	if e.err != nil {
		return nil, nil, e.err
	}
	if e.token.IsExpired(time.Now()) {
		return nil, nil, structs.ErrACLTokenExpired
	}
	return e.acl, e.token, nil
}

func (r *RemoteResolver) fetch(secret string) *remoteEntry {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	tok := server.AnonymousToken
	if secret != "" {
		var t structs.ACLToken
		if err := r.get(ctx, "/v1/acl/token/self", secret, &t); err != nil {
			return &remoteEntry{err: err}
		}
		tok = &t
	}
	if tok.Type == structs.ACLTokenTypeManagement {
		return &remoteEntry{acl: structs.ManagementACL, token: tok}
	}
	var rules []*structs.ACLPolicyRules
	for _, name := range tok.Policies {
		var p structs.ACLPolicy
		err := r.get(ctx, "/v1/acl/policy/"+url.PathEscape(name), secret, &p)
		if errors.Is(err, structs.ErrNotFound) || errors.Is(err, structs.ErrPermissionDenied) && secret == "" {
			continue // deleted policy, or no anonymous policy
		}
		if err != nil {
			return &remoteEntry{err: err}
		}
		pr, err := server.ParseACLPolicy(p.Rules)
		if err != nil {
			continue // grants nothing, as on the server
		}
		rules = append(rules, pr)
	}
	acl := structs.DenyAllACL
	if len(rules) > 0 {
		acl = structs.NewACL(rules)
	}
	return &remoteEntry{acl: acl, token: tok}
}

// get GETs path from the first server that answers and decodes the JSON
// body into out. 403 maps to structs.ErrACLTokenNotFound, 404 to
// structs.ErrNotFound.
func (r *RemoteResolver) get(ctx context.Context, path, secret string, out interface{}) error {
	var last error
	for _, s := range r.servers {
		u := *s
		u.Path = strings.TrimSuffix(u.Path, "/") + path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		if secret != "" {
			req.Header.Set(HeaderNomadToken, secret)
		}
		resp, err := r.http.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxRemoteACLBody))
		resp.Body.Close()
		switch {
		case err != nil:
			last = err
			continue
		case resp.StatusCode == http.StatusForbidden:
			return structs.ErrACLTokenNotFound
		case resp.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%s: %w", path, structs.ErrNotFound)
		case resp.StatusCode != http.StatusOK:
			// A 400 here is usually "ACL support disabled": the servers
			// run without ACLs while this agent checks them.
			last = fmt.Errorf("%s: status %d: %.200s", u.Host, resp.StatusCode, strings.TrimSpace(string(body)))
			continue
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("decode %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("resolve ACL token: no server answered: %v", last)
}
