package endpoint

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// hopHeaders are the hop-by-hop headers (RFC 9110 section 7.6.1), never
// forwarded either way; the headers a Connection header names are dropped
// too. Te is dropped as well: the router asks members for no trailers.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// copyBufs are the response copy buffers (32 KiB).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// aLongTimeAgo is a deadline that aborts a blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// outcome is what one dispatch attempt to a member came to.
type outcome int

const (
	// done: the request was answered (or failed after dispatch, answered
	// with the error); no other member may see it.
	done outcome = iota
	// next: nothing of the request was written to the member; try the
	// next admitted member.
	next
)

// ServeHTTP routes one request to an admitted member (Router is an
// http.Handler; Start serves it on ListenAddr).
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.handlers.Add(1)
	defer r.handlers.Done()
	r.requests.Add(1)
	if req.Method == http.MethodConnect {
		r.failed.Add(1)
		http.Error(w, "endpoint router: CONNECT not supported", http.StatusMethodNotAllowed)
		return
	}
	select {
	case r.sem <- struct{}{}:
	default:
		r.rejected.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "endpoint router: too many requests in flight", http.StatusServiceUnavailable)
		return
	}
	r.inFlight.Add(1)
	defer func() {
		r.inFlight.Add(-1)
		<-r.sem
	}()
	rot := r.rot.Load()
	n := len(rot.members)
	if n == 0 {
		r.failed.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "endpoint "+r.ep.Name+": no admitted member", http.StatusServiceUnavailable)
		return
	}
	if req.ContentLength > r.cfg.MaxRequestBodyBytes {
		r.failed.Add(1)
		http.Error(w, "endpoint router: request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	out, body := r.outgoing(w, req)
	start := r.pick(rot)
	for i := 0; i < n; i++ {
		m := rot.members[(start+i)%n]
		if r.forward(w, req, out, body, m) == done {
			return
		}
		// The dial failed or the member closed its kept-alive
		// connections: re-verify it now so that it leaves the rotation
		// soon if it is gone.
		m.kickVerify()
		if req.Context().Err() != nil {
			break
		}
	}
	r.failed.Add(1)
	http.Error(w, "endpoint "+r.ep.Name+": no member reachable", http.StatusBadGateway)
}

// pick returns the position in rot of the first member to try: the next in
// round-robin order, or under least_outstanding the one with the fewest
// requests in flight, ties in round-robin order.
func (r *Router) pick(rot *rotation) int {
	n := len(rot.members)
	start := int((r.rr.Add(1) - 1) % uint64(n))
	if r.ep.Policy != structs.EndpointPolicyLeastOutstanding {
		return start
	}
	best, bestN := start, rot.members[start].outstanding.Load()
	for i := 1; i < n && bestN > 0; i++ {
		j := (start + i) % n
		if o := rot.members[j].outstanding.Load(); o < bestN {
			best, bestN = j, o
		}
	}
	return best
}

// trackedBody records whether a request body was read at all: once it
// was, the request can go to no other member.
type trackedBody struct {
	io.ReadCloser
	touched bool
	err     error // the first read error but io.EOF
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.touched = true
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// Close does nothing: Request.Write closes the body it was given even when
// it fails before reading it, and such a request may still go to the next
// member. The server closes the client's body after the handler.
func (b *trackedBody) Close() error { return nil }

// outgoing builds the request sent to members: hop-by-hop headers dropped,
// X-Forwarded-For appended, the body (if any) bounded and tracked.
func (r *Router) outgoing(w http.ResponseWriter, req *http.Request) (*http.Request, *trackedBody) {
	h := req.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	removeHopHeaders(h)
	h.Del("Expect") // the router's server answered any 100-continue
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // send none, as received
	}
	if ip, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h.Set("X-Forwarded-For", ip)
	}
	u := &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	if req.RequestURI == "*" {
		u = &url.URL{Opaque: "*"}
	}
	out := &http.Request{
		Method:     req.Method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       req.Host,
	}
	var body *trackedBody
	if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
		body = &trackedBody{ReadCloser: http.MaxBytesReader(w, req.Body, r.cfg.MaxRequestBodyBytes)}
		out.Body = body
		out.ContentLength = req.ContentLength
	}
	return out, body
}

// removeHopHeaders deletes the hop-by-hop headers of h.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// forward dispatches out to m and relays the answer to w. It returns next
// only when no byte of the request was written to m and its body was not
// read, so that the request may go to another member.
func (r *Router) forward(w http.ResponseWriter, req *http.Request, out *http.Request, body *trackedBody, m *member) outcome {
	ctx := req.Context()
	m.outstanding.Add(1)
	defer m.outstanding.Add(-1)
	pc, err := m.pool.get(ctx)
	if err != nil {
		r.log.Debug("member unreachable, trying the next", "alloc_id", m.allocID, "addr", m.addr, "error", err)
		return next
	}
	// Unblock the exchange when the client goes away or Close cuts it.
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(aLongTimeAgo) })
	defer stop()
	_ = pc.conn.SetDeadline(time.Now().Add(r.cfg.ResponseHeaderTimeout))

	var rc *http.ResponseController
	if body != nil {
		// A client trickling its body must not hold a slot for ever.
		rc = http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(r.cfg.RequestBodyTimeout))
	}
	err = out.Write(pc.bw)
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		if pc.cw.n == 0 && (body == nil || !body.touched) {
			_ = pc.conn.Close()
			if rc != nil {
				_ = rc.SetReadDeadline(time.Time{})
			}
			return next
		}
		if rc != nil {
			// The body may be unread: leave the read deadline expired so
			// that the server does not wait to drain it, and close.
			_ = rc.SetReadDeadline(aLongTimeAgo)
			w.Header().Set("Connection", "close")
		}
		if body != nil && body.err != nil {
			// The client's body failed, not the member.
			_ = pc.conn.Close()
			r.failed.Add(1)
			var mbe *http.MaxBytesError
			switch {
			case errors.As(body.err, &mbe):
				http.Error(w, "endpoint router: request body too large", http.StatusRequestEntityTooLarge)
			case errors.Is(body.err, os.ErrDeadlineExceeded):
				http.Error(w, "endpoint router: request body not received in time", http.StatusRequestTimeout)
			default:
				http.Error(w, "endpoint router: reading the request body failed", http.StatusBadRequest)
			}
			return done
		}
		// A member that answers before reading the whole body (an early
		// 413 or 401) and closes makes the write fail part way; its
		// answer is already in, and it is the client's answer.
		if ctx.Err() == nil {
			_ = pc.conn.SetReadDeadline(time.Now().Add(earlyAnswerWait))
			if resp, rerr := readResponse(pc, out); rerr == nil {
				r.log.Debug("member answered before reading the whole request", "alloc_id", m.allocID, "status", resp.StatusCode, "write_error", err)
				return r.relay(ctx, w, pc, resp, m, stop, true)
			}
		}
		_ = pc.conn.Close()
		r.memberFailed(ctx, m)
		r.log.Debug("sending to member failed", "alloc_id", m.allocID, "error", err)
		http.Error(w, "endpoint "+r.ep.Name+": member connection broken", http.StatusBadGateway)
		return done
	}

	if rc != nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if rw, ok := w.(*respWriter); ok {
		// A slow answer (a model at work): see the client go away.
		rw.sc.watchAfter()
	}

	resp, err := readResponse(pc, out)
	if err != nil {
		_ = pc.conn.Close()
		r.memberFailed(ctx, m)
		r.log.Debug("member response failed", "alloc_id", m.allocID, "error", err)
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			http.Error(w, "endpoint "+r.ep.Name+": member response timeout", http.StatusGatewayTimeout)
		} else {
			http.Error(w, "endpoint "+r.ep.Name+": member connection broken", http.StatusBadGateway)
		}
		return done
	}
	return r.relay(ctx, w, pc, resp, m, stop, false)
}

// earlyAnswerWait bounds the wait for a member's answer after writing the
// request to it failed part way (it is normally in already).
const earlyAnswerWait = time.Second

// relay sends the member's response resp, read from pc, to w, then pools
// pc, or closes it when mustClose (the request was not fully written), the
// member asked to, or the client went away. stop is the AfterFunc stop of
// the client's context watch.
func (r *Router) relay(ctx context.Context, w http.ResponseWriter, pc *pconn, resp *http.Response, m *member, stop func() bool, mustClose bool) outcome {
	// Headers are in; the body may stream for as long as it takes.
	_ = pc.conn.SetDeadline(time.Time{})
	if ctx.Err() != nil {
		_ = pc.conn.SetDeadline(aLongTimeAgo)
	}
	m.served.Add(1)

	removeHopHeaders(resp.Header)
	dst := w.Header()
	for k, vv := range resp.Header {
		dst[k] = vv
	}
	if len(resp.Trailer) > 0 {
		keys := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst["Trailer"] = []string{strings.Join(keys, ", ")}
	}
	dst[MemberHeader] = []string{m.allocID}
	w.WriteHeader(resp.StatusCode)

	if err := copyFlushing(w, resp.Body); err != nil {
		_ = pc.conn.Close()
		if errors.Is(err, errClientWrite) {
			return done // the client went away; nothing to tell it
		}
		r.memberFailed(ctx, m)
		r.log.Debug("member response body broke", "alloc_id", m.allocID, "error", err)
		// Cut the client's connection: a truncated body must not look
		// complete.
		panic(http.ErrAbortHandler)
	}
	for k, vv := range resp.Trailer {
		dst[k] = vv
	}
	// Pool the connection only once the abort above can no longer fire
	// on it (it would cut the connection's next request).
	if !stop() || mustClose || resp.Close || ctx.Err() != nil {
		_ = pc.conn.Close()
	} else {
		m.pool.put(pc)
	}
	return done
}

// memberFailed counts a request that failed after dispatch; unless the
// client went away (or Close cut it), the member is blamed and re-verified
// now.
func (r *Router) memberFailed(ctx context.Context, m *member) {
	r.failed.Add(1)
	if ctx.Err() == nil {
		m.failed.Add(1)
		m.kickVerify()
	}
}

// readResponse reads the member's response headers, skipping 1xx
// informational responses (the router's server sends its own 100
// Continue). The status lines and headers of all of them together are
// bounded by MaxResponseHeaderBytes: a member cannot make the agent
// buffer headers without end, nor loop on a flood of 1xx responses.
func readResponse(pc *pconn, out *http.Request) (*http.Response, error) {
	// Bytes bufio read ahead of the headers were counted when they were
	// read; what is left is the bound for the rest.
	pc.lr.left = MaxResponseHeaderBytes
	defer func() { pc.lr.left = -1 }()
	for {
		resp, err := http.ReadResponse(pc.br, out)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil, errors.New("member switched protocols, which the router does not relay")
			}
			return resp, nil
		}
	}
}

// errClientWrite marks a failed write to the client.
var errClientWrite = errors.New("writing to the client")

// copyFlushing copies src to w, flushing after each write so that
// server-sent events and chunked streams pass through unbuffered. It reads
// src to its end (so the connection can be kept alive).
func copyFlushing(w http.ResponseWriter, src io.Reader) error {
	fl, _ := w.(http.Flusher)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return errors.Join(errClientWrite, werr)
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
