package http

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/server"
)

// Parked blocking queries. Every client agent holds a blocking query on
// its allocations open for up to 5 minutes (GET
// /v1/node/{id}/client-allocs). Served the ordinary way, each waiting
// query keeps net/http's connection goroutine with the handler's stack
// under it (about 8 KiB), the connection's background-read goroutine, its
// 4 KiB read and 4+2 KiB write buffers and the request: about 25 KiB of a
// server's memory per node, 250 MiB at 10,000 nodes. A Parker instead
// takes the connection over while the query waits (http.Hijacker),
// keeping only the connection, a timer and one small goroutine selecting
// on the query's watch channels; when one fires or the wait ends it runs
// the request again through the whole handler (authorization, routing,
// metrics) as a query that answers at once, writes that answer to the
// connection and hands the connection back to the http.Server through
// its listener (Accept), as if the client had just connected. TLS
// connections keep their *tls.Conn, and the http.Server serves them
// without a second handshake. A request that cannot be parked (HTTP/2,
// Connection: close, a body, a watch too wide) blocks as before.

// parkResumeTimeout bounds the write of a resumed query's answer to a
// client that does not read it.
const parkResumeTimeout = 10 * time.Second

// parkProbeInterval is how often a parked connection is looked at
// (probeParked): a client that hung up frees its connection, its slot
// under the per-client limit and its wait within that, as net/http's
// background read frees a waiting handler's, and bytes it sent end the
// wait. A look is a timer and one non-blocking recv(MSG_PEEK): 2,000
// parked connections cost about 3 ms of CPU a second at 5 s (6.4 ms at
// 2 s, measured on a 2-core machine); about 15 ms at 10,000 nodes if it
// scales linearly (not measured).
const parkProbeInterval = 5 * time.Second

// parkProbe is what probeParked saw on a parked connection.
type parkProbe int

const (
	parkIdle parkProbe = iota
	parkBytes
	parkGone
)

// errParked is returned by a route whose request a Parker took over: the
// answer will come from the resumed request, nothing is written now.
var errParked = errors.New("http: request parked")

// Parker is a net.Listener around the HTTP server's own that parks
// blocking queries (see above). Serve the http.Server on it, give it the
// server's handler with SetHandler and the API handler with
// Config.Parker. Close closes the listener and every parked connection.
type Parker struct {
	inner net.Listener

	startOnce sync.Once
	accepted  chan acceptResult
	resumed   chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	// acceptEnded is closed when the inner listener has failed for good;
	// acceptErr is that error.
	acceptEnded chan struct{}
	acceptErr   error

	logger hclog.Logger

	mu      sync.Mutex
	handler http.Handler
	parked  map[net.Conn]struct{}
	// handed holds the connections given back to the http.Server that
	// have not started a request since (ConnState): Close closes them,
	// as the server would wait for them (see ConnState).
	handed map[net.Conn]struct{}
}

type acceptResult struct {
	c   net.Conn
	err error
}

// NewParker returns a Parker accepting from inner; logger (nil for none)
// gets the panics of resumed requests.
func NewParker(inner net.Listener, logger hclog.Logger) *Parker {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Parker{inner: inner, logger: logger, accepted: make(chan acceptResult), resumed: make(chan net.Conn, 64),
		done: make(chan struct{}), acceptEnded: make(chan struct{}), parked: map[net.Conn]struct{}{},
		handed: map[net.Conn]struct{}{}}
}

// SetHandler sets the handler resumed requests run through: the
// http.Server's Handler, so they pass every wrapper a request does.
// Until it is set nothing is parked.
func (p *Parker) SetHandler(h http.Handler) {
	p.mu.Lock()
	p.handler = h
	p.mu.Unlock()
}

// Accept returns the next connection: a new one from the inner listener
// or one whose parked query has been answered.
func (p *Parker) Accept() (net.Conn, error) {
	p.startOnce.Do(func() { go p.acceptLoop() })
	select {
	case c := <-p.resumed:
		return c, nil
	case r := <-p.accepted:
		return r.c, r.err
	case <-p.acceptEnded:
		return nil, p.acceptErr
	case <-p.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop passes the inner listener's connections and temporary
// errors (too many open files: http.Server waits and asks again) on, until
// one that is not: Accept returns that one from then on.
func (p *Parker) acceptLoop() {
	for {
		c, err := p.inner.Accept()
		var te interface{ Temporary() bool }
		if err != nil && !(errors.As(err, &te) && te.Temporary()) {
			p.acceptErr = err
			close(p.acceptEnded)
			return
		}
		select {
		case p.accepted <- acceptResult{c, err}:
		case <-p.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
	}
}

// Close closes the inner listener and every parked connection.
func (p *Parker) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	err := p.inner.Close()
	p.mu.Lock()
	conns := p.parked
	p.parked = map[net.Conn]struct{}{}
	handed := p.handed
	p.handed = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	for c := range handed {
		_ = c.Close()
	}
	p.dropResumed()
	return err
}

// ConnState is the http.Server's ConnState hook (chain it with any
// other): it follows the connections the Parker handed back. To the
// server such a connection is new (StateNew) until its next request, and
// http.Server.Shutdown waits up to 5 s for a new connection to send one;
// a client that keeps it open without asking again held the agent's 5 s
// shutdown to its deadline. Close (which Shutdown calls first) closes
// those that have not started a request; one that has is the server's.
func (p *Parker) ConnState(c net.Conn, st http.ConnState) {
	if st == http.StateNew {
		return
	}
	p.mu.Lock()
	delete(p.handed, c)
	p.mu.Unlock()
}

// dropResumed closes the resumed connections no Accept has taken: once
// the Parker is closed or its listener has failed, none will.
func (p *Parker) dropResumed() {
	for {
		select {
		case c := <-p.resumed:
			_ = c.Close()
		default:
			return
		}
	}
}

// stopped reports whether Accept hands out no more connections.
func (p *Parker) stopped() bool {
	select {
	case <-p.done:
		return true
	case <-p.acceptEnded:
		return true
	default:
		return false
	}
}

// Addr is the inner listener's address.
func (p *Parker) Addr() net.Addr { return p.inner.Addr() }

// parkKey is the request context key of a *parkMark.
type parkKey struct{}

// parkMark follows a parkable request: ServeHTTP puts one in the context
// of each request of a parkable route.
type parkMark struct {
	// orig is the request as ServeHTTP received it, before authorization.
	orig *http.Request
	// start is when the request first arrived (a resumed request's
	// duration counts its wait).
	start time.Time
	// resumed is set on a request a Parker runs again: its query
	// answers at once.
	resumed bool
	// parked is set once the request has been taken over: ServeHTTP then
	// neither logs nor counts it (its resumed run does).
	parked bool
}

// markParkable returns r with a parkMark in its context when the handler
// parks and pattern is a parkable route, and the mark (nil otherwise, or
// the resumed request's own).
func (h *handler) markParkable(r *http.Request, pattern string) (*http.Request, *parkMark) {
	if m, ok := r.Context().Value(parkKey{}).(*parkMark); ok {
		return r, m
	}
	if h.parker == nil || pattern != routeClientAllocs {
		return r, nil
	}
	m := &parkMark{orig: r, start: time.Now()}
	return r.WithContext(context.WithValue(r.Context(), parkKey{}, m)), m
}

// resumedRequest reports whether r is a parked request run again.
func resumedRequest(r *http.Request) bool {
	m, ok := r.Context().Value(parkKey{}).(*parkMark)
	return ok && m.resumed
}

// park takes r's connection over until one of wait's channels closes or
// its wait passes, then answers r from a resumed run. It reports false
// when r cannot be parked (it then still owns wait's release).
func (p *Parker) park(w http.ResponseWriter, r *http.Request, wait *server.QueryWait) bool {
	m, ok := r.Context().Value(parkKey{}).(*parkMark)
	if !ok || m.resumed || len(wait.Chans) > 4 || r.ProtoMajor != 1 || r.Close || r.Body != http.NoBody {
		return false
	}
	p.mu.Lock()
	h := p.handler
	p.mu.Unlock()
	if h == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	m.parked = true
	// A request the client sent behind this one (pipelined) would be
	// lost with the buffer: answer this one, then close.
	closeAfter := rw.Reader.Buffered() > 0
	_ = conn.SetDeadline(time.Time{})
	p.mu.Lock()
	p.parked[conn] = struct{}{}
	p.mu.Unlock()
	orig, start := m.orig, m.start
	go p.waitParked(conn, wait, func() { p.resume(conn, h, orig, start, closeAfter) })
	return true
}

// waitParked waits for one of wait's channels, the end of its wait or the
// Parker's close, then resumes the connection (or closes it).
func (p *Parker) waitParked(conn net.Conn, wait *server.QueryWait, resume func()) {
	var c [4]<-chan struct{}
	copy(c[:], wait.Chans)
	t := time.NewTimer(wait.Wait)
	probe := time.NewTicker(parkProbeInterval)
	closed := false
wait:
	for {
		select {
		case <-c[0]:
		case <-c[1]:
		case <-c[2]:
		case <-c[3]:
		case <-t.C:
		case <-p.done:
			closed = true
		case <-probe.C:
			switch probeParked(conn) {
			case parkIdle:
				continue wait
			case parkGone:
				closed = true
			case parkBytes:
				// Answer now; the HTTP server reads what follows.
			}
		}
		break
	}
	probe.Stop()
	t.Stop()
	wait.Release()
	p.mu.Lock()
	_, mine := p.parked[conn]
	delete(p.parked, conn)
	p.mu.Unlock()
	if closed || !mine {
		_ = conn.Close()
		return
	}
	resume()
}

// resume runs orig again through h as a query that answers at once,
// writes its answer to conn and hands conn back to the http.Server
// (Accept), or closes it when the write fails or closeAfter is set.
func (p *Parker) resume(conn net.Conn, h http.Handler, orig *http.Request, start time.Time, closeAfter bool) {
	defer func() {
		// As net/http does for a handler's panic: that connection
		// ends, the server goes on.
		if v := recover(); v != nil {
			_ = conn.Close()
			if v != http.ErrAbortHandler {
				p.logger.Error("panic serving a parked request", "panic", v, "stack", string(debug.Stack()))
			}
		}
	}()
	ctx := context.WithValue(context.WithoutCancel(orig.Context()), parkKey{}, &parkMark{start: start, resumed: true})
	req := orig.Clone(ctx)
	rec := &parkRecorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	if rec.header.Get("Date") == "" {
		rec.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	if !req.ProtoAtLeast(1, 1) && !closeAfter {
		// HTTP/1.0 keep-alive (park refused the others): say it is
		// kept, as net/http does, or the client takes it as closed.
		rec.header.Set("Connection", "keep-alive")
	}
	// Request: the answer to a HEAD (the mux routes it to the GET) has
	// no body, or the client would read it as the next answer.
	resp := &http.Response{StatusCode: rec.code, ProtoMajor: 1, ProtoMinor: 1, Header: rec.header,
		ContentLength: int64(rec.body.Len()), Body: io.NopCloser(&rec.body), Close: closeAfter, Request: req}
	var out bytes.Buffer
	out.Grow(rec.body.Len() + 512)
	err := resp.Write(&out)
	if err == nil {
		_ = conn.SetWriteDeadline(time.Now().Add(parkResumeTimeout))
		_, err = conn.Write(out.Bytes())
		_ = conn.SetWriteDeadline(time.Time{})
	}
	if err != nil || closeAfter || p.stopped() {
		_ = conn.Close()
		return
	}
	p.mu.Lock()
	p.handed[conn] = struct{}{}
	p.mu.Unlock()
	select {
	case p.resumed <- conn:
	case <-p.done:
		p.unhand(conn)
		return
	case <-p.acceptEnded:
		p.unhand(conn)
		return
	}
	// Stopped since (Close's dropResumed may have run before the send):
	// nothing will take it from the queue.
	if p.stopped() {
		p.dropResumed()
	}
}

// unhand closes conn, which no Accept will take, and forgets it.
func (p *Parker) unhand(conn net.Conn) {
	p.mu.Lock()
	delete(p.handed, conn)
	p.mu.Unlock()
	_ = conn.Close()
}

// parkRecorder is the ResponseWriter of a resumed request: the answer is
// buffered whole, then written to the connection with its length.
type parkRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *parkRecorder) Header() http.Header { return r.header }

func (r *parkRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *parkRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// routeClientAllocs is the one parkable route.
const routeClientAllocs = "GET /v1/node/{id}/client-allocs"

// socketOf is the socket under c's wrappers (TLS, the connection limit),
// nil when there is none to look at.
func socketOf(c net.Conn) syscall.Conn {
	for i := 0; i < 8 && c != nil; i++ {
		if sc, ok := c.(syscall.Conn); ok {
			return sc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}
