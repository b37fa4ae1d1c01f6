// Package endpoint is the same-host model-serving router of issue 14: the
// client agent of the node that holds an endpoint's members runs one
// Router per endpoint, listening on the endpoint's port and spreading
// requests over the members it admitted.
//
// A member is admitted when (a) its service checks pass, (b) it is
// live-verified (its OpenAI-compatible models listing names the endpoint's
// model, checked every VerifyInterval) and (c) its identity (job version,
// artifact digest, config digest) equals the reference identity: the one
// held by the most members passing (a) and (b), ties to the identity of the
// member with the lowest Index.
//
// Requests are never replayed once dispatched: the router writes each
// request on a connection it owns (its own small HTTP/1.1 client, see
// conn.go) and moves on to the next admitted member only when no byte of
// the request was written to the chosen one (the dial failed, or a kept-
// alive connection was found closed by the member before use). After the
// first byte any failure goes back to the caller: 502 for a broken
// connection, 504 for a response header timeout, the member's own status
// for its 5xx answers.
//
// The router depends on no server: it keeps serving its last member set,
// and keeps re-verifying it, whatever the control plane does.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/structs"
)

// Defaults of the Config fields left zero.
const (
	// DefaultVerifyInterval is how often a member's models listing is
	// re-checked.
	DefaultVerifyInterval = 5 * time.Second
	// DefaultVerifyTimeout bounds one models listing request.
	DefaultVerifyTimeout = 2 * time.Second
	// DefaultDialTimeout bounds connecting to a member.
	DefaultDialTimeout = 2 * time.Second
	// DefaultResponseHeaderTimeout bounds writing a request to a member
	// and waiting for its response headers (a model's first token may
	// take long; streaming bodies after the headers are not bounded).
	DefaultResponseHeaderTimeout = 5 * time.Minute
	// DefaultReadHeaderTimeout bounds reading a client's request headers
	// (against slowloris clients).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultRequestBodyTimeout bounds reading a client's request body.
	DefaultRequestBodyTimeout = time.Minute
	// DefaultIdleTimeout closes a client's kept-alive connection idle
	// that long, and a member connection idle in the pool that long.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes bounds a client's request headers (64 KiB).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConcurrent bounds the requests served at once; the next
	// one is answered 503 at once.
	DefaultMaxConcurrent = 1024
	// DefaultMaxConns bounds the client connections held open at once;
	// further connections wait in the kernel's accept queue.
	DefaultMaxConns = 4096
	// DefaultMaxRequestBodyBytes bounds a request body (64 MiB).
	DefaultMaxRequestBodyBytes = 64 << 20
	// DefaultMaxIdleConnsPerMember bounds the kept-alive connections to
	// one member.
	DefaultMaxIdleConnsPerMember = 64
	// DefaultDrainTimeout is how long Close waits for in-flight requests.
	DefaultDrainTimeout = 30 * time.Second

	// MaxModelsBodyBytes bounds a member's models listing (1 MiB).
	MaxModelsBodyBytes = 1 << 20
	// MaxResponseHeaderBytes bounds a member's response status lines and
	// headers, 1xx responses included (1 MiB).
	MaxResponseHeaderBytes = 1 << 20
	// MaxMembers bounds the member set; SetMembers ignores the rest.
	MaxMembers = 64

	// MemberHeader is the response header naming the allocation ID of the
	// member that served the request.
	MemberHeader = "X-Gpulayer-Endpoint-Member"
)

// Errors returned by New and Start.
var (
	// ErrInvalidConfig wraps every validation error of New.
	ErrInvalidConfig = errors.New("invalid endpoint router config")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("endpoint router already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("endpoint router closed")
)

// Member is one allocation serving the endpoint.
type Member struct {
	AllocID string
	// Index is the allocation's index in its group (name
	// "job.group[i]"); round-robin order is by Index.
	Index int
	// Addr is the "host:port" the member serves HTTP on.
	Addr     string
	Identity structs.EndpointIdentity
	// ChecksPassing is true when all the member's service checks passed
	// their latest run (true when it has none).
	ChecksPassing bool
}

// Config configures a Router. Zero values take the defaults above.
type Config struct {
	// Endpoint is the endpoint served (Model and Policy are used; the
	// router keeps a copy).
	Endpoint *structs.Endpoint
	// ListenAddr is the address the router listens on ("127.0.0.1:9000",
	// ":9000"; port 0 picks one, see Addr).
	ListenAddr string
	// Logger logs admission changes; nil discards.
	Logger hclog.Logger
	// OnStatus is called whenever a member's admission changes (admitted
	// or not, reason, identity), in order, from one goroutine of the
	// router: never under a router lock and never on the data path. It
	// may call the router's methods but Close (which waits for the
	// pending calls).
	OnStatus func(allocID string, st structs.EndpointMemberStatus)
	// VerifyInterval is the live verification period; zero: 5 s.
	VerifyInterval time.Duration
	// VerifyTimeout bounds one models listing request; zero: 2 s.
	VerifyTimeout time.Duration
	// DialTimeout bounds connecting to a member; zero: 2 s.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds sending a request to a member and
	// waiting for its response headers; zero: 5 min.
	ResponseHeaderTimeout time.Duration
	// ReadHeaderTimeout bounds reading a client's request headers; zero:
	// 10 s.
	ReadHeaderTimeout time.Duration
	// RequestBodyTimeout bounds reading a client's request body (408
	// when it runs out; the member had the headers and sees the request
	// cut); zero: 1 min.
	RequestBodyTimeout time.Duration
	// IdleTimeout bounds idle kept-alive connections, clients' and
	// members'; zero: 90 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a client's request headers, in bytes; zero:
	// 64 KiB.
	MaxHeaderBytes int
	// MaxConcurrent bounds the requests in flight; the next one is
	// answered 503 without queueing; zero: 1,024.
	MaxConcurrent int
	// MaxConns bounds the open client connections; zero: 4,096.
	MaxConns int
	// MaxRequestBodyBytes bounds a request body, in bytes (413 above it);
	// zero: 64 MiB.
	MaxRequestBodyBytes int64
	// MaxIdleConnsPerMember bounds the kept-alive connections to one
	// member; zero: 64.
	MaxIdleConnsPerMember int
	// DrainTimeout is how long Close waits for in-flight requests before
	// cutting them; zero: 30 s.
	DrainTimeout time.Duration
	// Now is the clock (status times, pool ages); nil: time.Now.
	Now func() time.Time
}

// Router routes one endpoint's requests over its admitted members. Its
// methods are safe for concurrent use.
type Router struct {
	cfg Config
	ep  structs.Endpoint
	log hclog.Logger

	// mu guards members, member state and the lifecycle fields below.
	mu      sync.Mutex
	members map[string]*member
	started bool
	closed  bool
	ln      net.Listener
	lim     *limitListener // ln, bounded; closed by Unlisten or shutdown
	bgCtx   context.Context
	bgStop  context.CancelFunc
	bg      sync.WaitGroup // verifiers and the notifier

	// connMu guards the client connections (serve.go).
	connMu     sync.Mutex
	conns      map[*srvConn]struct{}
	inShutdown bool
	connCtx    context.Context // cancelled to cut every request
	connCancel context.CancelFunc
	// waitMu guards the requests waiting on their member (serve.go).
	waitMu    sync.Mutex
	waiting   map[*srvConn]time.Time
	waitArmed bool
	waitTimer *time.Timer

	rot atomic.Pointer[rotation] // admitted members, Index order
	rr  atomic.Uint64            // round-robin counter

	sem      chan struct{} // MaxConcurrent slots
	handlers sync.WaitGroup
	verifier *http.Client
	notify   *notifier

	closeOnce sync.Once
	closeErr  error

	requests atomic.Uint64
	failed   atomic.Uint64
	rejected atomic.Uint64
	inFlight atomic.Int64
}

// rotation is an immutable snapshot of the admitted members in Index
// order; the data path loads it without a lock.
type rotation struct {
	members []*member
}

// New validates cfg, fills its defaults and returns a Router that serves
// nothing until Start. It returns an error wrapping ErrInvalidConfig that
// names the field.
func New(cfg Config) (*Router, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cfg.setDefaults()
	r := &Router{
		cfg:     cfg,
		ep:      *cfg.Endpoint,
		log:     cfg.Logger.Named("endpoint").With("endpoint", cfg.Endpoint.Name),
		members: make(map[string]*member),
		sem:     make(chan struct{}, cfg.MaxConcurrent),
		conns:   make(map[*srvConn]struct{}),
		waiting: make(map[*srvConn]time.Time),
	}
	r.connCtx, r.connCancel = context.WithCancel(context.Background())
	if r.ep.ModelsPath == "" {
		r.ep.ModelsPath = structs.DefaultEndpointModelsPath
	}
	if r.ep.Policy == "" {
		r.ep.Policy = structs.EndpointPolicyRoundRobin
	}
	r.verifier = newVerifyClient(cfg)
	r.notify = newNotifier(cfg.OnStatus)
	r.rot.Store(&rotation{})
	return r, nil
}

func (c *Config) validate() error {
	if c.Endpoint == nil {
		return errors.New("Config.Endpoint: missing")
	}
	if c.Endpoint.Model == "" {
		return errors.New("Endpoint.Model: missing")
	}
	switch c.Endpoint.Policy {
	case "", structs.EndpointPolicyRoundRobin, structs.EndpointPolicyLeastOutstanding:
	default:
		return fmt.Errorf("Endpoint.Policy: %q is not %q or %q", c.Endpoint.Policy,
			structs.EndpointPolicyRoundRobin, structs.EndpointPolicyLeastOutstanding)
	}
	if p := c.Endpoint.ModelsPath; p != "" && (p[0] != '/' || len(p) > 1024) {
		return fmt.Errorf("Endpoint.ModelsPath: %q must start with '/' and be at most 1024 bytes", p)
	}
	if c.ListenAddr == "" {
		return errors.New("ListenAddr: missing")
	}
	if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		return fmt.Errorf("ListenAddr: %w", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"VerifyInterval", c.VerifyInterval}, {"VerifyTimeout", c.VerifyTimeout},
		{"DialTimeout", c.DialTimeout}, {"ResponseHeaderTimeout", c.ResponseHeaderTimeout},
		{"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"RequestBodyTimeout", c.RequestBodyTimeout},
		{"IdleTimeout", c.IdleTimeout},
		{"DrainTimeout", c.DrainTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s: %s is negative", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int64
	}{
		{"MaxHeaderBytes", int64(c.MaxHeaderBytes)}, {"MaxConcurrent", int64(c.MaxConcurrent)},
		{"MaxConns", int64(c.MaxConns)}, {"MaxRequestBodyBytes", c.MaxRequestBodyBytes},
		{"MaxIdleConnsPerMember", int64(c.MaxIdleConnsPerMember)},
	} {
		if n.v < 0 {
			return fmt.Errorf("%s: %d is negative", n.name, n.v)
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.VerifyInterval, DefaultVerifyInterval)
	def(&c.VerifyTimeout, DefaultVerifyTimeout)
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.RequestBodyTimeout, DefaultRequestBodyTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.DrainTimeout, DefaultDrainTimeout)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxRequestBodyBytes == 0 {
		c.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if c.MaxIdleConnsPerMember == 0 {
		c.MaxIdleConnsPerMember = DefaultMaxIdleConnsPerMember
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Start binds the listener (its error names the address) and returns;
// the router then serves and verifies its members in the background until
// Close, or until ctx is cancelled, which closes it as Close does. It
// returns ErrStarted on a second call and ErrClosed after Close.
func (r *Router) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.started {
		return ErrStarted
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", r.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("endpoint %q: listen on %s: %w", r.ep.Name, r.cfg.ListenAddr, err)
	}
	r.started = true
	r.ln = ln
	r.bgCtx, r.bgStop = context.WithCancel(context.Background())
	r.lim = newLimitListener(ln, r.cfg.MaxConns)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.serve(r.lim)
	}()
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.notify.run(r.bgCtx)
	}()
	for _, m := range r.members {
		r.startVerifierLocked(m)
	}
	stopWatch := context.AfterFunc(ctx, func() { _ = r.Close() })
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		<-r.bgCtx.Done()
		stopWatch()
	}()
	r.log.Info("endpoint router listening", "addr", ln.Addr().String(), "model", r.ep.Model, "policy", r.ep.Policy)
	return nil
}

// Addr returns the address the router listens on once started (with the
// port the kernel picked for port 0), else Config.ListenAddr.
func (r *Router) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		return r.ln.Addr().String()
	}
	return r.cfg.ListenAddr
}

// Unlisten closes the router's listener: when it returns the port is
// free for another listener (a router replacing this one), while the
// requests in flight and the client connections already open are served
// on until Close drains them. Before Start, and after the first call, it
// does nothing.
func (r *Router) Unlisten() error {
	r.mu.Lock()
	lim := r.lim
	r.mu.Unlock()
	if lim == nil {
		return nil
	}
	return lim.Close()
}

// Close stops listening, waits up to Config.DrainTimeout for in-flight
// requests to finish (then cuts the rest), stops verification and closes
// the member connections. Later calls return the first call's result: nil,
// or an error when the drain timed out.
func (r *Router) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.DrainTimeout)
	defer cancel()
	return r.Shutdown(ctx)
}

// Shutdown is Close with the drain bounded by ctx instead of
// Config.DrainTimeout.
func (r *Router) Shutdown(ctx context.Context) error {
	r.closeOnce.Do(func() { r.closeErr = r.shutdown(ctx) })
	return r.closeErr
}

func (r *Router) shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	lim := r.lim
	for _, m := range r.members {
		m.stopVerifier()
	}
	r.mu.Unlock()
	var err error
	if lim != nil {
		_ = lim.Close()
		if err = r.shutdownConns(ctx); err != nil {
			err = fmt.Errorf("endpoint %q: drain: %w", r.ep.Name, err)
		}
	}
	r.handlers.Wait()
	r.connCancel()
	if r.bgStop != nil {
		r.bgStop()
	}
	r.bg.Wait()
	r.mu.Lock()
	for _, m := range r.members {
		m.pool.close()
	}
	r.mu.Unlock()
	r.verifier.CloseIdleConnections()
	return err
}

// SetMembers replaces the member set with ms (the full current set). New
// members and members whose Addr or Identity changed are (re)verified
// before admission; a member whose checks stop passing leaves the rotation
// before SetMembers returns. Members beyond MaxMembers and repeated alloc
// IDs are ignored (logged); a member with an unusable Addr is kept, never
// admitted, with the reason in its status. Removed members are dropped
// without a status call; their in-flight requests finish.
func (r *Router) SetMembers(ms []Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(ms) > MaxMembers {
		r.log.Warn("member set too large, ignoring the rest", "members", len(ms), "max", MaxMembers)
		ms = ms[:MaxMembers]
	}
	seen := make(map[string]bool, len(ms))
	for _, nm := range ms {
		if nm.AllocID == "" || seen[nm.AllocID] {
			r.log.Warn("ignoring member with an empty or repeated alloc ID", "alloc_id", nm.AllocID, "addr", nm.Addr)
			continue
		}
		seen[nm.AllocID] = true
		old := r.members[nm.AllocID]
		switch {
		case old == nil:
			r.addMemberLocked(nm)
		case old.m.Addr != nm.Addr:
			r.removeMemberLocked(old)
			r.addMemberLocked(nm)
		case old.m.Identity != nm.Identity:
			old.m = nm
			old.gen++
			old.verified = false
			old.verifyReason = reasonUnverified
			old.kickVerify()
		default:
			old.m = nm
		}
	}
	for id, m := range r.members {
		if !seen[id] {
			r.removeMemberLocked(m)
		}
	}
	r.recomputeLocked()
}

func (r *Router) addMemberLocked(nm Member) {
	m := newMember(r, nm)
	r.members[nm.AllocID] = m
	if r.started && !r.closed {
		r.startVerifierLocked(m)
	}
}

func (r *Router) removeMemberLocked(m *member) {
	delete(r.members, m.m.AllocID)
	m.removed = true
	m.stopVerifier()
	m.pool.close()
}

// recomputeLocked recomputes every member's admission, publishes the new
// rotation and queues a status call for each member whose admission
// changed.
func (r *Router) recomputeLocked() {
	all := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		all = append(all, m)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].m.Index != all[j].m.Index {
			return all[i].m.Index < all[j].m.Index
		}
		return all[i].m.AllocID < all[j].m.AllocID
	})
	decisions := admit(all)
	admitted := make([]*member, 0, len(all))
	now := r.cfg.Now()
	for i, m := range all {
		d := decisions[i]
		if d.admitted {
			admitted = append(admitted, m)
		}
		st := structs.EndpointMemberStatus{Admitted: d.admitted, Reason: d.reason, Identity: m.m.Identity}
		if m.reported && st.Admitted == m.status.Admitted && st.Reason == m.status.Reason && st.Identity == m.status.Identity {
			continue
		}
		st.UpdatedAt = now.UnixNano()
		m.status, m.reported = st, true
		if st.Admitted {
			r.log.Info("member admitted", "alloc_id", m.m.AllocID, "index", m.m.Index, "addr", m.m.Addr)
		} else {
			r.log.Info("member not admitted", "alloc_id", m.m.AllocID, "index", m.m.Index, "addr", m.m.Addr, "reason", st.Reason)
		}
		r.notify.push(m.m.AllocID, st)
	}
	r.rot.Store(&rotation{members: admitted})
}
