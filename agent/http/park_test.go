package http

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// parkingNodeServer is a fakeNodeServer whose client-allocs query can be
// waited on outside it (NodeClientAllocsWaiter): a query with an index
// waits on wake for up to wait.
type parkingNodeServer struct {
	*fakeNodeServer
	wake     chan struct{}
	wait     time.Duration
	waits    atomic.Int64
	released atomic.Int64
	queries  []*structs.QueryOptions
	qmu      sync.Mutex
}

func (p *parkingNodeServer) NodeClientAllocsWait(ctx context.Context, nodeID string, q *structs.QueryOptions) (*server.QueryWait, error) {
	p.waits.Add(1)
	var once sync.Once
	return &server.QueryWait{Chans: []<-chan struct{}{p.wake}, Wait: p.wait, Release: func() { once.Do(func() { p.released.Add(1) }) }}, nil
}

func (p *parkingNodeServer) NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error) {
	p.qmu.Lock()
	c := *q
	p.queries = append(p.queries, &c)
	p.qmu.Unlock()
	return p.fakeNodeServer.NodeClientAllocs(ctx, nodeID, q)
}

// parkFixture serves the node routes on a Parker, as the agent does.
func parkFixture(t *testing.T, wait time.Duration) (*parkingNodeServer, *Parker, string) {
	t.Helper()
	pns, p, base, _ := parkServer(t, wait)
	return pns, p, base
}

// parkServer is parkFixture that also returns the http.Server, whose
// ConnState hook is the Parker's, as the agent sets it.
func parkServer(t *testing.T, wait time.Duration) (*parkingNodeServer, *Parker, string, *http.Server) {
	t.Helper()
	fs, _, _ := fixture(t)
	pns := &parkingNodeServer{fakeNodeServer: &fakeNodeServer{fakeServer: fs}, wake: make(chan struct{}), wait: wait}
	fs.meta = structs.QueryMeta{Index: 9}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewParker(ln, nil)
	h, err := New(Config{Server: pns, MaxBodyBytes: 4096, Parker: p})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnState: p.ConnState}
	p.SetHandler(srv.Handler)
	go func() { _ = srv.Serve(p) }()
	t.Cleanup(func() { _ = srv.Close() })
	return pns, p, "http://" + ln.Addr().String(), srv
}

func (p *Parker) parkedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}

// getReused sends a GET with the node secret on c and reports whether it
// went over a connection used before.
func getReused(t *testing.T, c *http.Client, url string) (*http.Response, string, bool) {
	t.Helper()
	var reused atomic.Bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused.Store(i.Reused) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(structs.HeaderNodeSecret, "s3cret")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), reused.Load()
}

// TestParkedQueryAnswersOnWake: a client-allocs query with an index is
// parked (no handler waits in it), answered once its watch fires with
// what the state holds then, and its connection goes back to the HTTP
// server: the next request reuses it. Without the Parker wiring the query
// answers at once (the fake does not block), so the parked count stays 0.
func TestParkedQueryAnswersOnWake(t *testing.T) {
	pns, p, base := parkFixture(t, time.Minute)
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: 30 * time.Second}
	type result struct {
		resp *http.Response
		body string
	}
	done := make(chan result, 1)
	go func() {
		resp, body, _ := getReused(t, c, base+"/v1/node/node-1/client-allocs?index=3")
		done <- result{resp, body}
	}()
	waittest.Until(t, 10*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	select {
	case r := <-done:
		t.Fatalf("answered while parked: %d %s", r.resp.StatusCode, r.body)
	default:
	}
	pns.mu.Lock()
	pns.allocs["new"] = &structs.Allocation{ID: "new", NodeID: "node-1", AllocModifyIndex: 12}
	pns.mu.Unlock()
	close(pns.wake)
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no answer after the wake-up")
	}
	var got structs.NodeClientAllocsHTTPResponse
	if r.resp.StatusCode != 200 || json.Unmarshal([]byte(r.body), &got) != nil || got.Allocs["new"] != 12 {
		t.Fatalf("answer %d %s", r.resp.StatusCode, r.body)
	}
	if r.resp.Header.Get("X-Gpulayer-Index") != "9" || r.resp.Header.Get("Date") == "" {
		t.Fatalf("headers %v", r.resp.Header)
	}
	pns.qmu.Lock()
	last := pns.queries[len(pns.queries)-1]
	pns.qmu.Unlock()
	if last.MinQueryIndex != 3 || last.MaxQueryTime != time.Nanosecond {
		t.Fatalf("resumed query %+v: want index 3, answered at once", last)
	}
	if pns.released.Load() != 1 || p.parkedCount() != 0 {
		t.Fatalf("released %d, parked %d", pns.released.Load(), p.parkedCount())
	}
	// The connection is served again.
	resp, body, reused := getReused(t, c, base+"/v1/node/node-1/client-allocs")
	if resp.StatusCode != 200 || !reused {
		t.Fatalf("next request: %d %s, reused connection %v", resp.StatusCode, body, reused)
	}
}

// TestParkedQueryTimesOut: with nothing changed the parked query answers
// at the end of its wait, on the same connection.
func TestParkedQueryTimesOut(t *testing.T) {
	pns, p, base := parkFixture(t, 200*time.Millisecond)
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: 30 * time.Second}
	for i := 0; i < 3; i++ {
		resp, body, reused := getReused(t, c, base+"/v1/node/node-1/client-allocs?index=3&wait=1s")
		if resp.StatusCode != 200 || !strings.Contains(body, "Allocs") || (i > 0 && !reused) {
			t.Fatalf("round %d: %d %s reused %v", i, resp.StatusCode, body, reused)
		}
	}
	if pns.waits.Load() != 3 || pns.released.Load() != 3 || p.parkedCount() != 0 {
		t.Fatalf("waits %d released %d parked %d", pns.waits.Load(), pns.released.Load(), p.parkedCount())
	}
}

// TestParkRefusesBadSecret: a query with a wrong node secret is refused
// before anything waits, parked or not.
func TestParkRefusesBadSecret(t *testing.T) {
	pns, p, base := parkFixture(t, time.Minute)
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/node/node-1/client-allocs?index=3", nil)
	req.Header.Set(structs.HeaderNodeSecret, "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if pns.waits.Load() != 0 || p.parkedCount() != 0 {
		t.Fatalf("waits %d parked %d", pns.waits.Load(), p.parkedCount())
	}
}

// TestParkerCloseEndsParked: closing the Parker (the HTTP server's
// shutdown) closes a parked connection and releases its wait.
func TestParkerCloseEndsParked(t *testing.T) {
	pns, p, base := parkFixture(t, time.Minute)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/node/node-1/client-allocs?index=3", nil)
		req.Header.Set(structs.HeaderNodeSecret, "s3cret")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d", resp.StatusCode)
		}
		errc <- err
	}()
	waittest.Until(t, 10*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	_ = p.Close()
	select {
	case err := <-errc:
		if strings.HasPrefix(err.Error(), "answered") {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the parked request did not end at Close")
	}
	waittest.Until(t, 10*time.Second, "the wait released", func() bool { return pns.released.Load() == 1 })
}

// TestParkedPipelinedClosesAfter: a request pipelined behind a parked one
// would be lost with the hijacked buffer, so the parked one is answered
// with Connection: close and the connection closed (the client sends the
// second again on a new one).
func TestParkedPipelinedClosesAfter(t *testing.T) {
	pns, _, base := parkFixture(t, 100*time.Millisecond)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	one := "GET /v1/node/node-1/client-allocs?index=3 HTTP/1.1\r\nHost: x\r\n" + structs.HeaderNodeSecret + ": s3cret\r\n\r\n"
	if _, err := conn.Write([]byte(one + one)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open after a pipelined request was dropped")
	}
	if pns.released.Load() != 1 {
		t.Fatalf("released %d", pns.released.Load())
	}
}

// TestParkedQueryOverTLS: a parked query on a TLS connection is answered
// over it and the connection, still a *tls.Conn, is served again without
// a second handshake: the next request reuses it and the handler sees its
// TLS state.
func TestParkedQueryOverTLS(t *testing.T) {
	fs, _, _ := fixture(t)
	pns := &parkingNodeServer{fakeNodeServer: &fakeNodeServer{fakeServer: fs}, wake: make(chan struct{}), wait: 100 * time.Millisecond}
	h, err := New(Config{Server: pns, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	// httptest's certificate and a client that trusts it.
	certSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer certSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewParker(tls.NewListener(ln, certSrv.TLS), nil)
	h.(*handler).parker = p
	var sawTLS atomic.Int64
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && resumedRequest(r) {
			sawTLS.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: outer}
	p.SetHandler(outer)
	go func() { _ = srv.Serve(p) }()
	defer srv.Close()
	c := certSrv.Client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	base := "https://" + ln.Addr().String()
	for i := 0; i < 2; i++ {
		resp, body, reused := getReused(t, c, base+"/v1/node/node-1/client-allocs?index=3")
		if resp.StatusCode != 200 || resp.TLS == nil || (i > 0 && !reused) {
			t.Fatalf("round %d: %d %s, reused %v", i, resp.StatusCode, body, reused)
		}
	}
	if pns.waits.Load() != 2 || pns.released.Load() != 2 || sawTLS.Load() != 2 {
		t.Fatalf("waits %d released %d, resumed requests with TLS state %d", pns.waits.Load(), pns.released.Load(), sawTLS.Load())
	}
}

// errListener returns errs in turn from Accept, then blocks until closed.
type errListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *errListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

type tempErr struct{}

func (tempErr) Error() string   { return "too many open files" }
func (tempErr) Temporary() bool { return true }
func (tempErr) Timeout() bool   { return false }

// TestParkerAcceptErrors: a temporary accept error is passed on and
// accepting goes on (http.Server asks again); a lasting one is returned
// from then on, to every Accept, instead of leaving them blocked.
func TestParkerAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gone := errors.New("listener gone")
	p := NewParker(&errListener{Listener: ln, errs: []error{tempErr{}}}, nil)
	if _, err := p.Accept(); !errors.Is(err, tempErr{}) {
		t.Fatalf("first Accept: %v, want the temporary error", err)
	}
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := p.Accept()
	if err != nil {
		t.Fatalf("Accept after a temporary error: %v", err)
	}
	c.Close()

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	p2 := NewParker(&errListener{Listener: ln2, errs: []error{gone}}, nil)
	for i := 0; i < 2; i++ {
		errc := make(chan error, 1)
		go func() { _, err := p2.Accept(); errc <- err }()
		select {
		case err := <-errc:
			if !errors.Is(err, gone) {
				t.Fatalf("Accept %d: %v, want %v", i, err, gone)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Accept %d blocked after the listener failed", i)
		}
	}
}

// TestParkedPanicEndsOnlyItsConnection: a resumed request whose handler
// panics closes its own connection, as net/http does; the server goes on
// answering.
func TestParkedPanicEndsOnlyItsConnection(t *testing.T) {
	pns, p, base := parkFixture(t, 50*time.Millisecond)
	p.mu.Lock()
	inner := p.handler
	p.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if resumedRequest(r) && r.URL.Query().Get("boom") != "" {
			panic("boom")
		}
		inner.ServeHTTP(w, r)
	})
	p.mu.Unlock()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/node/node-1/client-allocs?index=3&boom=1", nil)
	req.Header.Set(structs.HeaderNodeSecret, "s3cret")
	c := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the panicking request answered %d", resp.StatusCode)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the panicking request's connection was left open: %v", err)
	}
	resp, body, _ := getReused(t, c, base+"/v1/node/node-1/client-allocs?index=3")
	if resp.StatusCode != 200 || pns.released.Load() != 2 {
		t.Fatalf("after the panic: %d %s, released %d", resp.StatusCode, body, pns.released.Load())
	}
}
