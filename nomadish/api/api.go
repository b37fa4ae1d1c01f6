package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultAddress is the agent's HTTP address when neither Config.Address
// nor the GPULAYER_ADDR environment variable says otherwise.
const DefaultAddress = "http://127.0.0.1:4656"

// Header names of the blocking-query metadata and of the ACL token.
const (
	// HeaderIndex carries the Raft index of the data returned (QueryMeta.LastIndex).
	HeaderIndex = "X-Gpulayer-Index"
	// HeaderKnownLeader is "true" when the answering server knows a leader.
	HeaderKnownLeader = "X-Gpulayer-KnownLeader"
	// HeaderLastContact is the time since the answering server last heard
	// from the leader, in milliseconds.
	HeaderLastContact = "X-Gpulayer-LastContact"
	// HeaderToken carries the ACL token of the request.
	HeaderToken = "X-Gpulayer-Token"
	// HeaderNomadToken is Nomad's token header, sent as well so the
	// requests also fit a Nomad-shaped proxy or server.
	HeaderNomadToken = "X-Nomad-Token"
)

// Config configures a Client. The zero value of every field has a default.
type Config struct {
	// Address is the agent's base URL, e.g. "http://127.0.0.1:4656"; empty
	// means GPULAYER_ADDR, else DefaultAddress. A bare "host:port" gets
	// "http://" in front.
	Address string
	// HTTPClient sends the requests; nil means a client without a global
	// timeout (blocking queries and log streams may last minutes).
	HTTPClient *http.Client
	// Token is the ACL token's secret, sent in the X-Nomad-Token and
	// X-Gpulayer-Token headers; empty sends none.
	Token string
	// TLSConfig, when set and HTTPClient is nil, configures HTTPS to the
	// agent (api_tls.go); the Address must then be an https URL.
	TLSConfig *TLSConfig
	// Namespace, when set, is sent as ?namespace= on every request that
	// does not name one itself (as Nomad's api.Config.Namespace), so a
	// token scoped to that namespace passes the route checks; empty
	// sends none (the server's "default").
	Namespace string
}

// DefaultConfig returns a Config whose Address comes from the GPULAYER_ADDR
// environment variable, or DefaultAddress, and whose Token comes from
// GPULAYER_TOKEN, else NOMAD_TOKEN.
func DefaultConfig() *Config {
	addr := os.Getenv("GPULAYER_ADDR")
	if addr == "" {
		addr = DefaultAddress
	}
	return &Config{Address: addr, Token: EnvToken()}
}

// EnvToken returns the ACL token from the environment: GPULAYER_TOKEN,
// else NOMAD_TOKEN, else "".
func EnvToken() string {
	if t := os.Getenv("GPULAYER_TOKEN"); t != "" {
		return t
	}
	return os.Getenv("NOMAD_TOKEN")
}

// EnvNamespace returns the namespace from the environment:
// GPULAYER_NAMESPACE, else NOMAD_NAMESPACE, else "".
func EnvNamespace() string {
	if ns := os.Getenv("GPULAYER_NAMESPACE"); ns != "" {
		return ns
	}
	return os.Getenv("NOMAD_NAMESPACE")
}

// Client talks to one GPUlayer agent over HTTP. It is safe for concurrent
// use.
type Client struct {
	base      *url.URL
	http      *http.Client
	token     string
	namespace string
}

// Namespace returns the namespace the client sends (Config.Namespace).
func (c *Client) Namespace() string { return c.namespace }

// WithNamespace returns a copy of the client that sends ns as
// ?namespace= (empty: none); c is unchanged.
func (c *Client) WithNamespace(ns string) *Client {
	n := *c
	n.namespace = ns
	return &n
}

// NewClient returns a client for cfg (nil means DefaultConfig()). It fails
// when the address is not a valid http or https URL.
func NewClient(cfg *Config) (*Client, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	addr := cfg.Address
	if addr == "" {
		addr = DefaultConfig().Address
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("invalid address %q: %w", cfg.Address, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("invalid address %q: scheme must be http or https, got %q", cfg.Address, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("invalid address %q: no host", cfg.Address)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
		if cfg.TLSConfig != nil {
			t, err := cfg.TLSConfig.transport()
			if err != nil {
				return nil, err
			}
			hc.Transport = t
		}
	}
	return &Client{base: u, http: hc, token: cfg.Token, namespace: cfg.Namespace}, nil
}

// Address returns the agent's base URL.
func (c *Client) Address() string { return c.base.String() }

// QueryOptions shape a read. WaitIndex and WaitTime make it a blocking
// query: the server answers once the data's index exceeds WaitIndex, or
// after WaitTime (the server's default is 5 minutes, its maximum 10).
type QueryOptions struct {
	// WaitIndex is the index to wait past; zero answers at once.
	WaitIndex uint64
	// WaitTime bounds the wait; zero means the server's default.
	WaitTime time.Duration
	// Prefix filters list results by ID prefix.
	Prefix string
	// AllowStale lets any server answer from its own state.
	AllowStale bool
	// Params are further query parameters, e.g. "purge".
	Params map[string]string
	// Context cancels the request; nil means context.Background().
	Context context.Context
}

// WriteOptions shape a write.
type WriteOptions struct {
	// Context cancels the request; nil means context.Background().
	Context context.Context
}

// QueryMeta describes a read's answer, from the response headers.
type QueryMeta struct {
	// LastIndex is the Raft index of the data; pass it as the next
	// WaitIndex to wait for a change.
	LastIndex uint64
	// KnownLeader reports whether the server knew a leader.
	KnownLeader bool
	// LastContact is the time since the server last heard from the leader.
	LastContact time.Duration
	// RequestTime is how long the request took, measured by the client.
	RequestTime time.Duration
}

// WriteMeta describes a write's answer.
type WriteMeta struct {
	// LastIndex is the Raft index at which the write was applied.
	LastIndex uint64
	// RequestTime is how long the request took, measured by the client.
	RequestTime time.Duration
}

// StatusError is the error for a response whose status is not 2xx. Message
// is the "error" field of the JSON body, or the body's text when it is not
// JSON.
type StatusError struct {
	Code    int
	Message string
}

// Error renders "Unexpected response code: 404 (job not found)".
func (e *StatusError) Error() string {
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.Code, e.Message)
}

// IsNotFound reports whether err is a *StatusError with code 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// errorBody is the JSON body of every error answer.
type errorBody struct {
	Error string `json:"error"`
}

func ctxOf(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// newRequest builds a request for the escaped path (with any query values) and body
// (JSON-encoded when not nil).
func (c *Client) newRequest(ctx context.Context, method, path string, params url.Values, body interface{}) (*http.Request, error) {
	// path is already escaped (IDs go through url.PathEscape).
	u := *c.base
	raw := strings.TrimSuffix(u.EscapedPath(), "/") + path
	unescaped, err := url.PathUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid request path %q: %w", raw, err)
	}
	u.Path, u.RawPath = unescaped, raw
	if c.namespace != "" && params.Get("namespace") == "" {
		params = maps.Clone(params)
		if params == nil {
			params = url.Values{}
		}
		params.Set("namespace", c.namespace)
	}
	u.RawQuery = params.Encode()
	var rd io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request body: %w", err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctxOf(ctx), method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(HeaderNomadToken, c.token)
		req.Header.Set(HeaderToken, c.token)
	}
	return req, nil
}

// do sends req and returns the response when its status is 2xx; otherwise
// it closes the body and returns a *StatusError.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb errorBody
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
		msg = eb.Error
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return nil, &StatusError{Code: resp.StatusCode, Message: msg}
}

func queryParams(q *QueryOptions) url.Values {
	v := url.Values{}
	if q == nil {
		return v
	}
	if q.WaitIndex > 0 {
		v.Set("index", strconv.FormatUint(q.WaitIndex, 10))
	}
	if q.WaitTime > 0 {
		v.Set("wait", q.WaitTime.String())
	}
	if q.Prefix != "" {
		v.Set("prefix", q.Prefix)
	}
	if q.AllowStale {
		v.Set("stale", "true")
	}
	for k, val := range q.Params {
		v.Set(k, val)
	}
	return v
}

// query GETs path and decodes the JSON answer into out.
func (c *Client) query(path string, out interface{}, q *QueryOptions) (*QueryMeta, error) {
	var ctx context.Context
	if q != nil {
		ctx = q.Context
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, queryParams(q), nil)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	qm := parseQueryMeta(resp.Header)
	qm.RequestTime = time.Since(start)
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("decode response of GET %s: %w", path, err)
	}
	return qm, nil
}

// write sends method to path with body in JSON and decodes the JSON answer
// into out (when not nil).
func (c *Client) write(method, path string, params url.Values, body, out interface{}, w *WriteOptions) (*WriteMeta, error) {
	var ctx context.Context
	if w != nil {
		ctx = w.Context
	}
	req, err := c.newRequest(ctx, method, path, params, body)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	wm := &WriteMeta{RequestTime: time.Since(start)}
	wm.LastIndex, _ = strconv.ParseUint(resp.Header.Get(HeaderIndex), 10, 64)
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return nil, fmt.Errorf("decode response of %s %s: %w", method, path, err)
		}
	}
	return wm, nil
}

func parseQueryMeta(h http.Header) *QueryMeta {
	qm := &QueryMeta{}
	qm.LastIndex, _ = strconv.ParseUint(h.Get(HeaderIndex), 10, 64)
	qm.KnownLeader = h.Get(HeaderKnownLeader) == "true"
	if ms, err := strconv.ParseUint(h.Get(HeaderLastContact), 10, 64); err == nil {
		qm.LastContact = time.Duration(ms) * time.Millisecond
	}
	return qm
}
