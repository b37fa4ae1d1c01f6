package endpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The router's server side is its own too: one goroutine per client
// connection reads a request (http.ReadRequest), hands it to ServeHTTP with
// a ResponseWriter that writes the response head and a small body in one
// write, and loops. net/http's Server starts a background read on the
// client connection for every request (to see the client go away) and
// stops it at the end, which costs each request two goroutine wake-ups and
// as many syscalls; on a proxy that answers in a few hundred microseconds
// that was most of its added latency. Here the watch on the client starts
// only when a request is still waiting for its member after
// clientWatchDelay (a model's answer, not a cache hit), and it is the same
// watch: a client gone cancels the request.

// clientWatchDelay is how long a request waits for its member before the
// router starts watching the client connection for a close (a client gone
// is seen within twice that).
const clientWatchDelay = 50 * time.Millisecond

// headerSlop is read beyond MaxHeaderBytes before answering 431, as
// net/http's server does (the request line and bufio's read-ahead).
const headerSlop = 4096

// connState is a client connection's state, for Shutdown.
type connState int32

const (
	connIdle connState = iota // between requests: Shutdown closes it
	connActive
)

// srvConn is one client connection.
type srvConn struct {
	r      *Router
	c      net.Conn
	lr     limitedReader
	br     *bufio.Reader
	bw     *bufio.Writer
	ctx    context.Context
	cancel context.CancelFunc
	remote string
	state  atomic.Int32

	// body is the request body in flight.
	body *reqBody
	// linger: close gracefully (the client may still be sending).
	linger bool

	// watch is the client-close watch of the request in flight.
	watchMu    sync.Mutex
	watchArmed bool
	watching   bool
	watchDone  chan struct{}
	peeked     []byte // a byte the watch read (a pipelined request's)
	peekBuf    [1]byte
}

// limitedReader reads from the connection (after any byte the watch
// read), at most n bytes while a request's headers are read.
type limitedReader struct {
	sc      *srvConn
	n       int64
	limited bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.limited {
		if l.n <= 0 {
			return 0, io.EOF
		}
		if int64(len(p)) > l.n {
			p = p[:l.n]
		}
	}
	var n int
	var err error
	if len(l.sc.peeked) > 0 {
		n = copy(p, l.sc.peeked)
		l.sc.peeked = l.sc.peeked[n:]
	} else {
		n, err = l.sc.c.Read(p)
	}
	if l.limited {
		l.n -= int64(n)
	}
	return n, err
}

// serve accepts client connections on ln until it is closed.
func (r *Router) serve(ln net.Listener) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				r.log.Warn("accept failed, retrying", "error", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			r.log.Error("serving stopped", "addr", ln.Addr().String(), "error", err)
			return
		}
		delay = 0
		sc := r.newSrvConn(c)
		if sc == nil {
			continue
		}
		go sc.serve()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// newSrvConn registers c, or closes it and returns nil when the router is
// shutting down.
func (r *Router) newSrvConn(c net.Conn) *srvConn {
	sc := &srvConn{r: r, c: fastConn(c), remote: c.RemoteAddr().String()}
	sc.lr.sc = sc
	sc.br = bufio.NewReaderSize(&sc.lr, 4<<10)
	sc.bw = bufio.NewWriterSize(sc.c, 4<<10)
	sc.ctx, sc.cancel = context.WithCancel(r.connCtx)
	r.connMu.Lock()
	if r.inShutdown {
		r.connMu.Unlock()
		_ = c.Close()
		sc.cancel()
		return nil
	}
	r.conns[sc] = struct{}{}
	r.connMu.Unlock()
	return sc
}

// setActive marks sc active; false when the router is shutting down (sc
// must close).
func (sc *srvConn) setActive() bool {
	sc.r.connMu.Lock()
	defer sc.r.connMu.Unlock()
	if sc.r.inShutdown {
		return false
	}
	sc.state.Store(int32(connActive))
	return true
}

// setIdle marks sc idle; false when the router is shutting down.
func (sc *srvConn) setIdle() bool {
	sc.r.connMu.Lock()
	defer sc.r.connMu.Unlock()
	sc.state.Store(int32(connIdle))
	return !sc.r.inShutdown
}

func (sc *srvConn) close() {
	sc.stopWatch()
	if sc.linger && sc.ctx.Err() == nil {
		// Half-close and read what the client still sends, briefly,
		// so that the kernel does not reset the connection (and lose
		// the answer) for unread bytes.
		if cw, ok := unwrapConn(sc.c).(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = sc.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = io.CopyN(io.Discard, sc.c, maxDrainBytes)
		}
	}
	sc.cancel()
	_ = sc.c.Close()
	sc.r.connMu.Lock()
	delete(sc.r.conns, sc)
	sc.r.connMu.Unlock()
}

// serve reads and answers sc's requests until the client closes, a
// request asks to close, a timeout runs out or the router shuts down.
func (sc *srvConn) serve() {
	defer sc.close()
	r := sc.r
	w := &respWriter{sc: sc, header: make(http.Header)}
	first := true
	for {
		// Wait for the next request (idle timeout), then bound reading
		// its headers (slowloris clients).
		if !first {
			_ = sc.c.SetReadDeadline(time.Now().Add(r.cfg.IdleTimeout))
			if _, err := sc.br.Peek(1); err != nil {
				return
			}
		}
		first = false
		if !sc.setActive() {
			return
		}
		_ = sc.c.SetReadDeadline(time.Now().Add(r.cfg.ReadHeaderTimeout))
		sc.lr.limited, sc.lr.n = true, int64(r.cfg.MaxHeaderBytes)+headerSlop
		req, err := http.ReadRequest(sc.br)
		if err != nil {
			sc.badRequest(err)
			return
		}
		sc.lr.limited = false
		_ = sc.c.SetReadDeadline(time.Time{})
		if code, msg := checkRequest(req); code != 0 {
			sc.writeError(code, msg)
			return
		}
		req.RemoteAddr = sc.remote
		delete(req.Header, "Host")
		keep := sc.handle(w, req)
		if !keep || !sc.setIdle() {
			return
		}
	}
}

// badRequest answers a request that could not be read, where an answer
// makes sense.
func (sc *srvConn) badRequest(err error) {
	switch {
	case sc.lr.limited && sc.lr.n <= 0:
		sc.writeError(http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
	case isTimeout(err):
	default:
		var ne net.Error
		if errors.As(err, &ne) {
			return // the connection broke
		}
		sc.writeError(http.StatusBadRequest, "400 Bad Request")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapConn returns the connection inside c's wrappers.
func unwrapConn(c net.Conn) net.Conn {
	for {
		switch w := c.(type) {
		case *limitConn:
			c = w.Conn
		case *rawConn:
			c = w.Conn
		default:
			return c
		}
	}
}

// writeError writes a minimal error response that closes the connection.
func (sc *srvConn) writeError(code int, msg string) {
	sc.linger = true
	_ = sc.c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(sc.bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
	_ = sc.bw.Flush()
}

// checkRequest returns the status and message of a request the server
// refuses before the handler, as net/http's server does (version, Host,
// header syntax, Expect), or 0. ReadRequest already refused repeated Host
// headers and moved the Host to req.Host.
func checkRequest(req *http.Request) (int, string) {
	if req.ProtoMajor != 1 {
		return http.StatusHTTPVersionNotSupported, "505 HTTP Version Not Supported"
	}
	if req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != http.MethodConnect {
		return http.StatusBadRequest, "400 Bad Request: missing required Host header"
	}
	if !validHeaderValue(req.Host) || strings.ContainsAny(req.Host, " \t") {
		return http.StatusBadRequest, "400 Bad Request: malformed Host header"
	}
	for k, vv := range req.Header {
		if !validHeaderName(k) {
			return http.StatusBadRequest, "400 Bad Request: invalid header name"
		}
		for _, v := range vv {
			if !validHeaderValue(v) {
				return http.StatusBadRequest, "400 Bad Request: invalid header value"
			}
		}
	}
	if e := req.Header.Get("Expect"); e != "" && !strings.EqualFold(e, "100-continue") {
		return http.StatusExpectationFailed, "417 Expectation Failed"
	}
	return 0, ""
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v holds no control byte but HTAB.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// handle serves one request and reports whether the connection may serve
// the next.
func (sc *srvConn) handle(w *respWriter, req *http.Request) (keep bool) {
	w.reset(req)
	body := &reqBody{rc: req.Body, sc: sc}
	if req.ProtoAtLeast(1, 1) && req.ContentLength != 0 && strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		body.continueNeeded = true
	}
	if req.Body == nil || req.Body == http.NoBody {
		body.eof = true
	} else {
		req.Body = body
	}
	sc.body = body
	req = req.WithContext(sc.ctx)
	aborted := false
	func() {
		defer func() {
			if p := recover(); p != nil {
				aborted = true
				if p != http.ErrAbortHandler {
					sc.r.log.Error("panic serving a request", "remote", sc.remote, "panic", p)
				}
			}
		}()
		sc.r.ServeHTTP(w, req)
	}()
	sc.stopWatch()
	if aborted || w.err != nil || sc.ctx.Err() != nil {
		return false
	}
	if !body.eof && body.err == nil && !body.continueNeeded {
		// Read what is left of a small body, as net/http's server does,
		// so that the connection can serve the next request.
		_ = sc.c.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := io.CopyN(io.Discard, body, maxDrainBytes+1); err != io.EOF || n > maxDrainBytes {
			w.closeAfter = true
		}
		_ = sc.c.SetReadDeadline(time.Time{})
	}
	if err := w.finish(); err != nil {
		return false
	}
	if w.closeAfter || !body.eof || req.Close {
		// linger unless nothing more can come
		sc.linger = true
		return false
	}
	return true
}

// maxDrainBytes bounds the unread request body read after the handler.
const maxDrainBytes = 256 << 10

// watchAfter has the client watched for a close once the request has
// waited clientWatchDelay; it is called once a request went to its
// member. One router-wide timer, armed only while requests wait, finds
// the requests that waited that long: a timer per request, short and so
// the earliest, would wake the runtime's poller and monitor threads for
// every request.
func (sc *srvConn) watchAfter() {
	if !sc.body.eof || sc.br.Buffered() > 0 || len(sc.peeked) > 0 {
		// The body is still the client's to read, or the client sent
		// more already: nothing to watch.
		return
	}
	sc.watchMu.Lock()
	sc.watchArmed = true
	sc.watchMu.Unlock()
	r := sc.r
	r.waitMu.Lock()
	r.waiting[sc] = time.Now()
	if !r.waitArmed {
		r.waitArmed = true
		if r.waitTimer == nil {
			r.waitTimer = time.AfterFunc(clientWatchDelay, r.scanWaiting)
		} else {
			r.waitTimer.Reset(clientWatchDelay)
		}
	}
	r.waitMu.Unlock()
}

// scanWaiting starts the client watch of the requests that waited
// clientWatchDelay, and re-arms while others wait.
func (r *Router) scanWaiting() {
	now := time.Now()
	var due []*srvConn
	r.waitMu.Lock()
	for sc, since := range r.waiting {
		if now.Sub(since) >= clientWatchDelay {
			due = append(due, sc)
			delete(r.waiting, sc)
		}
	}
	r.waitArmed = len(r.waiting) > 0
	if r.waitArmed {
		r.waitTimer.Reset(clientWatchDelay)
	}
	r.waitMu.Unlock()
	for _, sc := range due {
		sc.startWatch()
	}
}

// startWatch reads the client connection in the background: a close or
// an error cancels the connection's context (and so the request); a byte
// (a pipelined request) is kept for the next ReadRequest.
func (sc *srvConn) startWatch() {
	sc.watchMu.Lock()
	defer sc.watchMu.Unlock()
	if !sc.watchArmed || sc.watching || sc.ctx.Err() != nil {
		return
	}
	sc.watching = true
	sc.watchDone = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		n, err := sc.c.Read(sc.peekBuf[:])
		if n == 1 {
			sc.peeked = sc.peekBuf[:1]
			return
		}
		if err != nil && !isTimeout(err) {
			sc.cancel() // the client went away
		}
	}(sc.watchDone)
}

// stopWatch ends the watch, if one runs, and waits for it.
func (sc *srvConn) stopWatch() {
	sc.watchMu.Lock()
	defer sc.watchMu.Unlock()
	if sc.watchArmed {
		sc.watchArmed = false
		sc.r.waitMu.Lock()
		delete(sc.r.waiting, sc)
		sc.r.waitMu.Unlock()
	}
	if !sc.watching {
		return
	}
	_ = sc.c.SetReadDeadline(aLongTimeAgo)
	<-sc.watchDone
	_ = sc.c.SetReadDeadline(time.Time{})
	sc.watching = false
}

// reqBody is a request's body as the server reads it: it sends 100
// Continue on the first read when asked, and records reaching its end
// (only then may the connection serve another request).
type reqBody struct {
	rc             io.ReadCloser
	sc             *srvConn
	continueNeeded bool
	eof            bool
	err            error
}

func (b *reqBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.continueNeeded {
		b.continueNeeded = false
		if _, err := io.WriteString(b.sc.bw, "HTTP/1.1 100 Continue\r\n\r\n"); err == nil {
			_ = b.sc.bw.Flush()
		}
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil {
		b.err = err
	}
	return n, err
}

func (b *reqBody) Close() error { return nil }

// respWriter is the http.ResponseWriter of the router's server. The head
// is written with the first body bytes (one write for a small answer); a
// body without Content-Length is chunked, unless it is complete before
// the first flush, when it gets a Content-Length.
type respWriter struct {
	sc     *srvConn
	req    *http.Request
	header http.Header

	status      int
	wroteHeader bool // WriteHeader called
	committed   bool // head written to the buffer
	chunked     bool
	bodyAllowed bool
	contentLen  int64 // -1: unknown
	written     int64
	pending     []byte // body bytes held before the head is committed
	trailers    []string
	closeAfter  bool
	err         error
}

func (w *respWriter) reset(req *http.Request) {
	clear(w.header)
	w.req = req
	w.status = 0
	w.wroteHeader, w.committed, w.chunked, w.closeAfter = false, false, false, false
	w.bodyAllowed = false
	w.contentLen = -1
	w.written = 0
	w.pending = w.pending[:0]
	w.trailers = w.trailers[:0]
	w.err = nil
}

func (w *respWriter) Header() http.Header { return w.header }

func (w *respWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return // informational answers are the server's own (100 Continue)
	}
	w.wroteHeader = true
	w.status = code
	w.bodyAllowed = w.req.Method != http.MethodHead && code != http.StatusNoContent && code != http.StatusNotModified
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLen = n
		} else {
			delete(w.header, "Content-Length")
		}
	}
}

func (w *respWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !w.bodyAllowed {
		if w.req.Method == http.MethodHead {
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLen >= 0 && w.written+int64(len(p)) > w.contentLen {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.contentLen < 0 && len(w.pending)+len(p) <= w.sc.bw.Available() {
			// Held: the answer may be complete before a flush.
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.commit(false)
	}
	w.writeBody(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

func (w *respWriter) writeBody(p []byte) {
	if len(p) == 0 {
		return
	}
	bw := w.sc.bw
	if w.chunked {
		var hb [20]byte
		h := strconv.AppendInt(hb[:0], int64(len(p)), 16)
		h = append(h, '\r', '\n')
		_, _ = bw.Write(h)
	}
	_, err := bw.Write(p)
	if w.chunked && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	if err != nil {
		w.setErr(err)
	}
}

func (w *respWriter) setErr(err error) {
	if w.err == nil {
		w.err = err
		w.closeAfter = true
	}
}

// commit writes the head to the buffer; final says the handler is done,
// so a held body gets a Content-Length.
func (w *respWriter) commit(final bool) {
	if w.committed {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.committed = true
	h := w.header
	if w.req.Close || !w.req.ProtoAtLeast(1, 1) && !hasToken(w.req.Header.Get("Connection"), "keep-alive") {
		w.closeAfter = true
	}
	if hasToken(h.Get("Connection"), "close") {
		w.closeAfter = true
	}
	delete(h, "Connection")
	delete(h, "Transfer-Encoding")
	if w.bodyAllowed && w.contentLen < 0 {
		if final {
			w.contentLen = int64(len(w.pending))
			h["Content-Length"] = []string{strconv.Itoa(len(w.pending))}
		} else if w.req.ProtoAtLeast(1, 1) {
			w.chunked = true
			for _, v := range h["Trailer"] {
				for _, k := range strings.Split(v, ",") {
					if k = strings.TrimSpace(k); k != "" {
						w.trailers = append(w.trailers, http.CanonicalHeaderKey(k))
					}
				}
			}
		} else {
			w.closeAfter = true // HTTP/1.0: the body ends with the connection
		}
	}
	if !w.chunked {
		delete(h, "Trailer")
	}
	if _, ok := h["Date"]; !ok {
		var db [len(http.TimeFormat)]byte
		h["Date"] = []string{string(time.Now().UTC().AppendFormat(db[:0], http.TimeFormat))}
	}
	bw := w.sc.bw
	var sb [64]byte
	line := append(sb[:0], "HTTP/1.1 "...)
	line = strconv.AppendInt(line, int64(w.status), 10)
	line = append(line, ' ')
	line = append(line, http.StatusText(w.status)...)
	line = append(line, '\r', '\n')
	_, _ = bw.Write(line)
	for k, vv := range h {
		for _, v := range vv {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			writeHeaderValue(bw, v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	if w.chunked {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.closeAfter {
		_, _ = bw.WriteString("Connection: close\r\n")
	} else if !w.req.ProtoAtLeast(1, 1) {
		_, _ = bw.WriteString("Connection: keep-alive\r\n")
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		w.setErr(err)
	}
	if len(w.pending) > 0 {
		p := w.pending
		w.pending = w.pending[:0]
		w.writeBody(p)
	}
}

// writeHeaderValue writes v with any CR or LF as a space (a header cannot
// be split).
func writeHeaderValue(bw *bufio.Writer, v string) {
	if !strings.ContainsAny(v, "\r\n") {
		_, _ = bw.WriteString(v)
		return
	}
	_, _ = bw.WriteString(strings.NewReplacer("\r", " ", "\n", " ").Replace(v))
}

func hasToken(v, token string) bool {
	for _, f := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), token) {
			return true
		}
	}
	return false
}

// Flush sends what was written (http.Flusher).
func (w *respWriter) Flush() {
	_ = w.FlushError()
}

// FlushError is Flush returning the write error (http.ResponseController).
func (w *respWriter) FlushError() error {
	if w.err != nil {
		return w.err
	}
	w.commit(false)
	if err := w.sc.bw.Flush(); err != nil {
		w.setErr(err)
	}
	return w.err
}

// SetReadDeadline bounds reading the request body
// (http.ResponseController).
func (w *respWriter) SetReadDeadline(t time.Time) error { return w.sc.c.SetReadDeadline(t) }

// SetWriteDeadline bounds writing the response (http.ResponseController).
func (w *respWriter) SetWriteDeadline(t time.Time) error { return w.sc.c.SetWriteDeadline(t) }

// finish completes the response after the handler returned and sends it.
func (w *respWriter) finish() error {
	w.commit(true)
	if w.err != nil {
		return w.err
	}
	bw := w.sc.bw
	if w.chunked {
		_, _ = bw.WriteString("0\r\n")
		for _, k := range w.trailers {
			for _, v := range w.header[k] {
				_, _ = bw.WriteString(k)
				_, _ = bw.WriteString(": ")
				writeHeaderValue(bw, v)
				_, _ = bw.WriteString("\r\n")
			}
		}
		_, _ = bw.WriteString("\r\n")
	} else if w.bodyAllowed && w.contentLen >= 0 && w.written != w.contentLen {
		w.closeAfter = true // short body: the client must see it cut
	}
	if err := bw.Flush(); err != nil {
		w.setErr(err)
		return err
	}
	return nil
}

// shutdownConns closes idle client connections and waits for the active
// ones to end, until ctx is done: then it cuts them and returns ctx's
// error.
func (r *Router) shutdownConns(ctx context.Context) error {
	r.connMu.Lock()
	r.inShutdown = true
	r.connMu.Unlock()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		r.connMu.Lock()
		for sc := range r.conns {
			if connState(sc.state.Load()) == connIdle {
				_ = sc.c.Close()
			}
		}
		n := len(r.conns)
		r.connMu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			r.connCancel()
			r.connMu.Lock()
			for sc := range r.conns {
				_ = sc.c.Close()
			}
			r.connMu.Unlock()
			return ctx.Err()
		case <-t.C:
		}
	}
}
