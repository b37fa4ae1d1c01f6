package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/structs"
)

// DefaultServerRequestTimeout bounds a request of the HTTP server
// connection that is not a blocking query.
const DefaultServerRequestTimeout = 10 * time.Second

// ErrNoServers wraps the error of a call that no configured server
// answered: every one was unreachable or had no leader.
var ErrNoServers = errors.New("no server answered")

// HTTPServerConnConfig configures an HTTPServerConn.
type HTTPServerConnConfig struct {
	// Servers are the servers' HTTP API addresses, "host:port" or URLs
	// ("http://10.0.0.1:4656"). At least one is required.
	Servers []string
	// HTTPClient sends the requests; nil means a client with no global
	// timeout (each request gets its own deadline).
	HTTPClient *http.Client
	// RequestTimeout bounds a request that is not a blocking query; zero
	// means DefaultServerRequestTimeout (10 seconds). A blocking query may
	// take its wait time plus this.
	RequestTimeout time.Duration
	// Logger defaults to a null logger.
	Logger hclog.Logger
	// TLS, when set, makes every call HTTPS with this client
	// configuration, which must verify the server's certificate
	// (agent/tlsutil Bundle.ServerHTTPClient: "server.<region>.gpulayer")
	// and present the client's own: "host:port" and http:// addresses are
	// reached over https. Ignored when HTTPClient is set.
	TLS *tls.Config
	// RegisterToken is the ACL token secret (agent config acl.token) sent
	// in X-Nomad-Token on node registration; with ACLs on, registering
	// needs a token with node write rights. Empty sends none.
	RegisterToken string
	// JSONOnly keeps the node routes in JSON. Otherwise they ask for
	// structs.ContentTypeNodeMsgpack answers and, to a server that has
	// answered in it, send their bodies in it too (a server that does not
	// speak it answers JSON, and keeps getting JSON).
	JSONOnly bool
}

// HTTPServerConn is the ServerConn of a client agent without a local
// server: it speaks the node routes of the HTTP API (PUT /v1/node/register,
// PUT /v1/node/{id}/heartbeat, GET and POST /v1/node/{id}/allocations, the
// client-allocs pair) to a list of servers, in msgpack
// (structs.ContentTypeNodeMsgpack) with servers that answer in it and in
// JSON otherwise (see HTTPServerConnConfig.JSONOnly). Like Nomad's client rotating its server list, it sends
// every call to the server that answered last and, when that one is
// unreachable or answers 5xx (no leader, not the leader, shutting down),
// moves on to the next server in the list and retries the call there, each
// server at most once per call. It remembers each node's secret from
// NodeRegister and sends it in the X-Gpulayer-Node-Secret header. It is
// safe for concurrent use.
type HTTPServerConn struct {
	servers []*url.URL
	http    *http.Client
	timeout time.Duration
	logger  hclog.Logger

	// registerToken is sent in X-Nomad-Token on node registration.
	registerToken string
	// jsonOnly is HTTPServerConnConfig.JSONOnly.
	jsonOnly bool
	// msgpack holds, by server index, whether that server has answered a
	// node route in structs.ContentTypeNodeMsgpack.
	msgpack []atomic.Bool

	mu      sync.Mutex
	current int
	secrets map[string]string
	// polls holds the cancel functions of the blocking queries in flight,
	// by server index, so that a failed call to a server also ends the
	// long polls waiting on it (see call).
	polls   map[int]map[uint64]context.CancelFunc
	pollSeq uint64
}

var (
	_ ServerConn       = (*HTTPServerConn)(nil)
	_ AllocChangesConn = (*HTTPServerConn)(nil)
)

// NewHTTPServerConn returns a connection to cfg.Servers. It returns an
// error wrapping structs.ErrInvalid when the list is empty or an address
// is not a host:port or an http(s) URL.
func NewHTTPServerConn(cfg HTTPServerConnConfig) (*HTTPServerConn, error) {
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: servers: at least one server address is required", structs.ErrInvalid)
	}
	c := &HTTPServerConn{
		http:    cfg.HTTPClient,
		timeout: cfg.RequestTimeout,
		logger:  cfg.Logger,
		secrets: map[string]string{},

		registerToken: cfg.RegisterToken,
		jsonOnly:      cfg.JSONOnly,
	}
	for i, s := range cfg.Servers {
		u, err := ParseServerAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: servers[%d]: %v", structs.ErrInvalid, i, err)
		}
		if cfg.TLS != nil {
			// A client with TLS on never talks plain HTTP to a server.
			u.Scheme = "https"
		}
		c.servers = append(c.servers, u)
	}
	c.msgpack = make([]atomic.Bool, len(c.servers))
	if c.http == nil {
		c.http = &http.Client{}
		if cfg.TLS != nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = cfg.TLS.Clone()
			c.http.Transport = t
		}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultServerRequestTimeout
	}
	if c.logger == nil {
		c.logger = hclog.NewNullLogger()
	}
	return c, nil
}

// ParseServerAddr reads a server address: "host:port" (http assumed) or
// an http or https URL with a host and no path. The error names what is
// wrong.
func ParseServerAddr(s string) (*url.URL, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return nil, errors.New("empty server address")
	}
	if !strings.Contains(raw, "://") {
		if _, port, err := net.SplitHostPort(raw); err != nil {
			return nil, fmt.Errorf("server address %q: want host:port or an http URL: %v", s, err)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("server address %q: port %q is not a number in 1-65535", s, port)
		}
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("server address %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server address %q: scheme must be http or https, got %q", s, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server address %q: no host", s)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("server address %q: must not have a path or query", s)
	}
	u.Path = ""
	return u, nil
}

// Servers returns the configured server base URLs in rotation order,
// starting with the one the next call goes to.
func (c *HTTPServerConn) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.servers))
	for i := range c.servers {
		out = append(out, c.servers[(c.current+i)%len(c.servers)].String())
	}
	return out
}

// NodeRegister implements ServerConn: PUT /v1/node/register with the
// node and its secret.
func (c *HTTPServerConn) NodeRegister(ctx context.Context, node *structs.Node) (time.Duration, error) {
	if node == nil || node.ID == "" || node.SecretID == "" {
		return 0, fmt.Errorf("node register: %w: node ID and secret are required", structs.ErrInvalid)
	}
	c.mu.Lock()
	c.secrets[node.ID] = node.SecretID
	c.mu.Unlock()
	var out structs.NodeHeartbeatHTTPResponse
	body := structs.NodeRegisterHTTPRequest{Node: node, SecretID: node.SecretID}
	if _, err := c.callNode(ctx, http.MethodPut, "/v1/node/register", nil, node.ID, body, &out, 0); err != nil {
		return 0, fmt.Errorf("node register: %w", err)
	}
	return out.HeartbeatTTL, nil
}

// NodeUpdateStatus implements ServerConn: PUT /v1/node/{id}/heartbeat.
// A server that does not know the node answers 404, returned as an error
// wrapping structs.ErrNotFound.
func (c *HTTPServerConn) NodeUpdateStatus(ctx context.Context, nodeID, status string) (time.Duration, error) {
	return c.NodeHeartbeatGPUs(ctx, nodeID, status, nil)
}

var _ GPUHeartbeater = (*HTTPServerConn)(nil)

// NodeHeartbeatGPUs implements GPUHeartbeater: the heartbeat with the
// GPU samples in its body.
func (c *HTTPServerConn) NodeHeartbeatGPUs(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (time.Duration, error) {
	var out structs.NodeHeartbeatHTTPResponse
	path := "/v1/node/" + url.PathEscape(nodeID) + "/heartbeat"
	body := structs.NodeHeartbeatHTTPRequest{Status: status, GPUs: gpus}
	if _, err := c.callNode(ctx, http.MethodPut, path, nil, nodeID, body, &out, 0); err != nil {
		return 0, fmt.Errorf("node heartbeat: %w", err)
	}
	return out.HeartbeatTTL, nil
}

// NodeAllocations implements ServerConn: a blocking GET
// /v1/node/{id}/allocations?index=&wait= answered by whichever server the
// rotation reaches (any server answers reads from its own state).
func (c *HTTPServerConn) NodeAllocations(ctx context.Context, nodeID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	params := url.Values{}
	var wait time.Duration
	if q != nil {
		if q.MinQueryIndex > 0 {
			params.Set("index", strconv.FormatUint(q.MinQueryIndex, 10))
			wait = q.MaxQueryTime
			if wait <= 0 {
				wait = structs.DefaultBlockingQueryWait
			}
			// The server adds up to 1/16 of jitter.
			wait += wait / 16
		}
		if q.MaxQueryTime > 0 {
			params.Set("wait", q.MaxQueryTime.String())
		}
		if q.AllowStale {
			params.Set("stale", "true")
		}
	}
	var out []*structs.Allocation
	path := "/v1/node/" + url.PathEscape(nodeID) + "/allocations"
	h, err := c.callNode(ctx, http.MethodGet, path, params, nodeID, nil, &out, wait)
	if err != nil {
		return nil, structs.QueryMeta{}, fmt.Errorf("node allocations: %w", err)
	}
	meta := structs.QueryMeta{KnownLeader: h.Get("X-Gpulayer-KnownLeader") == "true"}
	meta.Index, _ = strconv.ParseUint(h.Get("X-Gpulayer-Index"), 10, 64)
	if ms, err := strconv.ParseInt(h.Get("X-Gpulayer-LastContact"), 10, 64); err == nil {
		meta.LastContact = time.Duration(ms) * time.Millisecond
	}
	return out, meta, nil
}

// NodeClientAllocs implements AllocChangesConn: a blocking GET
// /v1/node/{id}/client-allocs?index=&wait=.
func (c *HTTPServerConn) NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error) {
	params, wait := queryParams(q)
	var out structs.NodeClientAllocsHTTPResponse
	path := "/v1/node/" + url.PathEscape(nodeID) + "/client-allocs"
	h, err := c.callNode(ctx, http.MethodGet, path, params, nodeID, nil, &out, wait)
	if err != nil {
		return nil, structs.QueryMeta{}, fmt.Errorf("node client allocations: %w", err)
	}
	return out.Allocs, queryMeta(h), nil
}

// NodeFetchAllocs implements AllocChangesConn: POST
// /v1/node/{id}/client-allocs/fetch with the IDs.
func (c *HTTPServerConn) NodeFetchAllocs(ctx context.Context, nodeID string, ids []string, q *structs.QueryOptions) (*structs.NodeFetchAllocsHTTPResponse, structs.QueryMeta, error) {
	params, _ := queryParams(q)
	var out structs.NodeFetchAllocsHTTPResponse
	path := "/v1/node/" + url.PathEscape(nodeID) + "/client-allocs/fetch"
	h, err := c.callNode(ctx, http.MethodPost, path, params, nodeID, structs.NodeFetchAllocsHTTPRequest{AllocIDs: ids}, &out, 0)
	if err != nil {
		return nil, structs.QueryMeta{}, fmt.Errorf("node fetch allocations: %w", err)
	}
	return &out, queryMeta(h), nil
}

// queryParams renders q as blocking-query parameters and returns the time
// the request may take beyond the normal timeout (the wait and the
// server's jitter of up to 1/16).
func queryParams(q *structs.QueryOptions) (url.Values, time.Duration) {
	params := url.Values{}
	var wait time.Duration
	if q == nil {
		return params, 0
	}
	if q.MinQueryIndex > 0 {
		params.Set("index", strconv.FormatUint(q.MinQueryIndex, 10))
		wait = q.MaxQueryTime
		if wait <= 0 {
			wait = structs.DefaultBlockingQueryWait
		}
		wait += wait / 16
	}
	if q.MaxQueryTime > 0 {
		params.Set("wait", q.MaxQueryTime.String())
	}
	if q.AllowStale {
		params.Set("stale", "true")
	}
	return params, wait
}

// queryMeta reads the blocking-query headers of an answer.
func queryMeta(h http.Header) structs.QueryMeta {
	meta := structs.QueryMeta{KnownLeader: h.Get("X-Gpulayer-KnownLeader") == "true"}
	meta.Index, _ = strconv.ParseUint(h.Get("X-Gpulayer-Index"), 10, 64)
	if ms, err := strconv.ParseInt(h.Get("X-Gpulayer-LastContact"), 10, 64); err == nil {
		meta.LastContact = time.Duration(ms) * time.Millisecond
	}
	return meta
}

// UpdateAllocs implements ServerConn: POST /v1/node/{id}/allocations,
// one request per node named by the allocations (a client has one).
func (c *HTTPServerConn) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	byNode := map[string][]*structs.Allocation{}
	var order []string
	for _, a := range allocs {
		if a == nil || a.ID == "" || a.NodeID == "" {
			return fmt.Errorf("update allocs: %w: every allocation needs ID and NodeID", structs.ErrInvalid)
		}
		if _, ok := byNode[a.NodeID]; !ok {
			order = append(order, a.NodeID)
		}
		byNode[a.NodeID] = append(byNode[a.NodeID], a)
	}
	for _, nodeID := range order {
		path := "/v1/node/" + url.PathEscape(nodeID) + "/allocations"
		body := newAllocUpdatesWire(byNode[nodeID])
		if _, err := c.callNode(ctx, http.MethodPost, path, nil, nodeID, body, nil, 0); err != nil {
			return fmt.Errorf("update allocs: %w", err)
		}
	}
	return nil
}

// call sends the request to the current server and, on a transport error
// or a 5xx answer, to each other server in turn. wait extends the request
// deadline of a blocking query. It returns the answer's headers, or the
// last error: a 4xx answer at once (it would be the same elsewhere),
// wrapping the structs sentinel for its code.
func (c *HTTPServerConn) call(ctx context.Context, method, path string, params url.Values, nodeID string, body, out interface{}, wait time.Duration) (http.Header, error) {
	return c.callAs(ctx, false, method, path, params, nodeID, body, out, wait)
}

// callNode is call for the node routes that speak
// structs.ContentTypeNodeMsgpack (agent/http client_routes_wire.go):
// unless the connection is JSONOnly, it asks for msgpack answers and
// sends msgpack bodies to a server that has answered in it.
func (c *HTTPServerConn) callNode(ctx context.Context, method, path string, params url.Values, nodeID string, body, out interface{}, wait time.Duration) (http.Header, error) {
	return c.callAs(ctx, !c.jsonOnly, method, path, params, nodeID, body, out, wait)
}

// callAs is call, with msgpack negotiated when binary is set.
func (c *HTTPServerConn) callAs(ctx context.Context, binary bool, method, path string, params url.Values, nodeID string, body, out interface{}, wait time.Duration) (http.Header, error) {
	pl := &payloads{body: body}
	c.mu.Lock()
	start := c.current
	secret := c.secrets[nodeID]
	n := len(c.servers)
	c.mu.Unlock()

	var lastErr error
	for i := 0; i < n; i++ {
		idx := (start + i) % n
		rctx, release := ctx, func() {}
		if wait > 0 {
			rctx, release = c.trackPoll(ctx, idx)
		}
		w := wireJSON
		if binary {
			w = wireAccept
			if c.msgpack[idx].Load() {
				w = wireMsgpack
			}
		}
		payload, err := pl.get(w == wireMsgpack)
		if err != nil {
			release()
			return nil, err
		}
		h, retry, err := c.try(rctx, idx, method, path, params, secret, payload, w, out, wait)
		release()
		next := (idx + 1) % n
		if err == nil {
			c.mu.Lock()
			c.current = idx
			if wait > 0 && n > 1 && h.Get("X-Gpulayer-KnownLeader") != "true" {
				// A server that knows no leader answered a long poll
				// (its wait cut at the leader change, or timed out):
				// the next call asks another, which may hear from the
				// new leader, instead of waiting on this one again.
				c.current = next
			}
			c.mu.Unlock()
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if !retry {
			return nil, err
		}
		lastErr = err
		c.mu.Lock()
		if c.current == idx {
			c.current = next
		}
		c.mu.Unlock()
		if wait == 0 && n > 1 {
			// The server failed this call (unreachable, stopped, no
			// leader): the long polls waiting on it end too, and ask the
			// next server, rather than wait out their time on a server
			// whose connection may never close (a partition, a stopped
			// process). Only a call that is not a poll cuts: a poll's own
			// failure (maybe its cut) cutting the others would keep them
			// cutting each other.
			c.cutPolls(idx)
		}
		if n > 1 {
			c.logger.Debug("server failed; trying the next", "server", c.servers[idx].Host, "next", c.servers[next].Host, "error", err)
		}
	}
	return nil, fmt.Errorf("%w (%d servers tried): %w", ErrNoServers, n, lastErr)
}

// trackPoll returns ctx, also ended by cutPolls(idx), and its release.
func (c *HTTPServerConn) trackPoll(ctx context.Context, idx int) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	if c.polls == nil {
		c.polls = map[int]map[uint64]context.CancelFunc{}
	}
	if c.polls[idx] == nil {
		c.polls[idx] = map[uint64]context.CancelFunc{}
	}
	c.pollSeq++
	id := c.pollSeq
	c.polls[idx][id] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.polls[idx], id)
		c.mu.Unlock()
		cancel()
	}
}

// cutPolls ends the blocking queries in flight to server idx.
func (c *HTTPServerConn) cutPolls(idx int) {
	c.mu.Lock()
	polls := c.polls[idx]
	delete(c.polls, idx)
	c.mu.Unlock()
	for _, cancel := range polls {
		cancel()
	}
}

// try sends one request to one server. retry reports whether another
// server might answer differently (transport error, 5xx).
func (c *HTTPServerConn) try(ctx context.Context, idx int, method, path string, params url.Values, secret string, payload []byte, w wire, out interface{}, wait time.Duration) (http.Header, bool, error) {
	base := c.servers[idx]
	rctx, cancel := context.WithTimeout(ctx, c.timeout+wait)
	defer cancel()
	u := *base
	u.Path = path
	u.RawQuery = params.Encode()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(rctx, method, u.String(), rd)
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if payload != nil {
		if w == wireMsgpack {
			req.Header.Set("Content-Type", structs.ContentTypeNodeMsgpack)
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if w != wireJSON {
		req.Header.Set("Accept", structs.ContentTypeNodeMsgpack+", application/json")
	}
	if secret != "" {
		req.Header.Set(structs.HeaderNodeSecret, secret)
	}
	if path == "/v1/node/register" && c.registerToken != "" {
		req.Header.Set("X-Nomad-Token", c.registerToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, true, fmt.Errorf("%s %s%s: %w", method, base.Host, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := strings.TrimSpace(string(raw))
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
		err := fmt.Errorf("%s %s%s: %d: %w", method, base.Host, path, resp.StatusCode, statusSentinel(resp.StatusCode, msg))
		return nil, resp.StatusCode >= 500, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == structs.ContentTypeNodeMsgpack {
		c.msgpack[idx].Store(true)
		if out != nil {
			if err := decodeMsgpackAnswer(resp.Body, out); err != nil {
				return nil, true, fmt.Errorf("%s %s%s: decode answer: %w", method, base.Host, path, err)
			}
		}
		return resp.Header, false, nil
	}
	if w != wireJSON {
		// Asked for msgpack and answered in JSON: this server does not
		// speak it (any more); send it JSON bodies.
		c.msgpack[idx].Store(false)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return nil, true, fmt.Errorf("%s %s%s: decode answer: %w", method, base.Host, path, err)
		}
	}
	return resp.Header, false, nil
}

// statusSentinel maps an HTTP status to the structs sentinel the server
// mapped to it (agent/http's statusFor in reverse), keeping the server's
// message.
func statusSentinel(code int, msg string) error {
	var sentinel error
	switch code {
	case http.StatusNotFound:
		sentinel = structs.ErrNotFound
	case http.StatusBadRequest:
		sentinel = structs.ErrInvalid
	case http.StatusForbidden:
		sentinel = structs.ErrPermissionDenied
	case http.StatusServiceUnavailable:
		// No leader, or a follower that cannot forward: either way
		// another server may answer.
		sentinel = structs.ErrNoLeader
	default:
		return fmt.Errorf("%s", msg)
	}
	if msg == "" {
		return sentinel
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}

// NodeServices implements ServiceConn: POST /v1/node/{id}/services with
// the node's secret.
func (c *HTTPServerConn) NodeServices(ctx context.Context, nodeID string, req *structs.NodeServicesRequest) error {
	path := "/v1/node/" + url.PathEscape(nodeID) + "/services"
	if _, err := c.call(ctx, http.MethodPost, path, nil, nodeID, req, nil, 0); err != nil {
		return fmt.Errorf("service registrations: %w", err)
	}
	return nil
}
