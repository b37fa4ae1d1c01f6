package http

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// parkedGET is a raw parkable client-allocs request with the node secret.
const parkedGET = "GET /v1/node/node-1/client-allocs?index=3 HTTP/1.1\r\nHost: x\r\n" + structs.HeaderNodeSecret + ": s3cret\r\n\r\n"

// dialParked sends parkedGET on a new connection to addr.
func dialParked(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte(parkedGET)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestResumedWithNoServerIsClosed: a parked query answered after the HTTP
// server stopped accepting (its listener failed, or the Parker closed)
// has nobody to hand its connection to: the connection is closed, not
// left open in the Parker's queue for good.
func TestResumedWithNoServerIsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(p *Parker, inner net.Listener)
	}{
		{"listener failed", func(p *Parker, inner net.Listener) { _ = inner.Close() }},
		{"parker closed after the answer", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _, _ := fixture(t)
			pns := &parkingNodeServer{fakeNodeServer: &fakeNodeServer{fakeServer: fs}, wake: make(chan struct{}), wait: 10 * time.Minute}
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			p := NewParker(inner, nil)
			h, err := New(Config{Server: pns, MaxBodyBytes: 4096, Parker: p})
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: h}
			p.SetHandler(h)
			ln := inner
			if tc.stop == nil {
				// The server accepts elsewhere: nothing takes the
				// Parker's resumed connections, as after its Serve ended.
				if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				go func() { _ = srv.Serve(ln) }()
			} else {
				go func() { _ = srv.Serve(p) }()
			}
			defer srv.Close()
			conn := dialParked(t, ln.Addr().String())
			waittest.Until(t, 20*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
			if tc.stop != nil {
				tc.stop(p, inner)
			}
			close(pns.wake)
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(conn)
			if resp, err := http.ReadResponse(br, nil); err == nil {
				_, _ = io.ReadAll(resp.Body)
			}
			if tc.stop == nil {
				waittest.Until(t, 20*time.Second, "the answer queued", func() bool { return len(p.resumed) == 1 })
				_ = p.Close()
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("the resumed connection was left open: %v", err)
			}
		})
	}
}

// TestParkedClientGoneIsNoticed: a client that hangs up while its query is
// parked frees the connection (its descriptor, its slot under the
// per-client connection limit, its wait) within seconds, as net/http's
// background read does for a waiting handler, not at the end of a wait
// of up to ten minutes: a client agent restarting or retrying would
// otherwise fill its address's connection limit with dead connections.
func TestParkedClientGoneIsNoticed(t *testing.T) {
	pns, p, base := parkFixture(t, 10*time.Minute)
	addr := strings.TrimPrefix(base, "http://")
	const n = 20
	for i := 0; i < n; i++ {
		_ = dialParked(t, addr)
	}
	waittest.Until(t, 20*time.Second, "the queries parked", func() bool { return p.parkedCount() == n })
	// Of n more, half hang up; the other half stay (closed at cleanup).
	for i := 0; i < n; i++ {
		if conn := dialParked(t, addr); i%2 == 0 {
			_ = conn.Close()
		}
	}
	waittest.Until(t, 20*time.Second, "the hung-up clients' connections freed", func() bool {
		return p.parkedCount() == n+n/2 && pns.released.Load() == n/2
	})
}

// TestParkedBytesEndTheWait: bytes a client sends while its query is
// parked (a pipelined request, garbage) end the wait: the query is
// answered and the connection goes back to the HTTP server, which reads
// those bytes under its own limits, instead of leaving them unread in
// the kernel until the wait ends.
func TestParkedBytesEndTheWait(t *testing.T) {
	_, p, base := parkFixture(t, 10*time.Minute)
	conn := dialParked(t, strings.TrimPrefix(base, "http://"))
	waittest.Until(t, 20*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	if _, err := conn.Write([]byte("GET /v1/node/node-1/client-allocs HTTP/1.1\r\nHost: x\r\n" + structs.HeaderNodeSecret + ": s3cret\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		_, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("answer %d: status %d", i, resp.StatusCode)
		}
	}
}

// TestSocketOfUnwraps: the socket a parked connection is looked at
// through is found under TLS and the per-client connection limit, as the
// agent stacks them.
func TestSocketOfUnwraps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tcp, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	c := tls.Server(&limitedConn{Conn: tcp, release: func() {}}, &tls.Config{})
	if got := socketOf(c); got != tcp.(syscall.Conn) {
		t.Fatalf("socketOf = %T, want the TCP connection", got)
	}
	if socketOf(nopConn{}) != nil {
		t.Fatal("socketOf found a socket in a connection without one")
	}
}

// nopConn is a net.Conn with no socket under it.
type nopConn struct{ net.Conn }

// TestParkedHEADHasNoBody: a HEAD of the parkable route (the mux routes
// it to the GET) is parked like the GET; its resumed answer carries the
// headers without the body, as net/http's own, so the next request's
// answer on the keep-alive connection is read as its own and not behind
// a body the client never expected.
func TestParkedHEADHasNoBody(t *testing.T) {
	pns, p, base := parkFixture(t, 10*time.Minute)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("HEAD" + strings.TrimPrefix(parkedGET, "GET"))); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 20*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	close(pns.wake)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	head, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatal(err)
	}
	if head.StatusCode != 200 || head.Close {
		t.Fatalf("HEAD: status %d, close %v", head.StatusCode, head.Close)
	}
	if _, err := conn.Write([]byte("GET /v1/node/node-1/client-allocs HTTP/1.1\r\nHost: x\r\n" + structs.HeaderNodeSecret + ": s3cret\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the answer after the HEAD: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Allocs") {
		t.Fatalf("the answer after the HEAD: %d %q", resp.StatusCode, body)
	}
}

// TestParkedCountedOnce: a parked query is one request in the request
// metrics (its resumed run), and its duration counts the wait.
func TestParkedCountedOnce(t *testing.T) {
	pns, p, base := parkFixture(t, 10*time.Minute)
	conn := dialParked(t, strings.TrimPrefix(base, "http://"))
	waittest.Until(t, 20*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	time.Sleep(300 * time.Millisecond) // a wait the duration must count
	close(pns.wake)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	mresp, err := http.Get(base + "/v1/metrics?format=prometheus")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	// Every series of the route, whatever its code.
	var count, sum float64
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.Contains(line, `route="`+routeClientAllocs+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q", line)
		}
		switch {
		case strings.HasPrefix(line, "gpulayer_http_request_duration_seconds_count"):
			count += v
		case strings.HasPrefix(line, "gpulayer_http_request_duration_seconds_sum"):
			sum += v
		}
	}
	if count != 1 || sum < 0.3 {
		t.Fatalf("client-allocs counted %v times, %.3fs in all; want once, with its wait:\n%s", count, sum, text)
	}
}

// TestParkedHTTP10KeepAlive: an HTTP/1.0 client that asked to keep its
// connection (Connection: keep-alive) is told it is kept, as net/http
// tells it; without that header an HTTP/1.0 client takes the
// connection as closed after the answer. The connection then serves the
// next request.
func TestParkedHTTP10KeepAlive(t *testing.T) {
	pns, p, base := parkFixture(t, 10*time.Minute)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /v1/node/node-1/client-allocs?index=3 HTTP/1.0\r\nConnection: keep-alive\r\n" + structs.HeaderNodeSecret + ": s3cret\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 20*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	close(pns.wake)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		_, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.EqualFold(resp.Header.Get("Connection"), "keep-alive") {
			t.Fatalf("answer %d: status %d, Connection %q", i, resp.StatusCode, resp.Header.Get("Connection"))
		}
		if i == 0 {
			if _, err := conn.Write([]byte(strings.Replace(req, "?index=3", "", 1))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestParkRefusesHostileRequests: requests that must not park (a body,
// chunked or smuggled; Connection: close; HTTP/1.0 without keep-alive)
// and requests that must not reach a wait at all (a bad index or wait,
// another node's ID, no secret) are answered on their own connection
// with nothing parked, whatever the Parker.
func TestParkRefusesHostileRequests(t *testing.T) {
	pns, p, base := parkFixture(t, 10*time.Minute)
	pns.mu.Lock()
	pns.nodes["node-2"] = &structs.Node{ID: "node-2", SecretID: "other"}
	pns.mu.Unlock()
	const path = "/v1/node/node-1/client-allocs?index=3"
	secret := structs.HeaderNodeSecret + ": s3cret\r\n"
	for _, tc := range []struct {
		name, req string
		status    int
		waits     bool
	}{
		{"chunked body", "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + secret + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 200, true},
		// net/http drops the Content-Length; the chunked body keeps it
		// from parking.
		{"length and chunked", "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + secret + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 200, true},
		{"body", "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + secret + "Content-Length: 2\r\n\r\n{}", 200, true},
		{"connection close", "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + secret + "Connection: close\r\n\r\n", 200, true},
		{"http/1.0", "GET " + path + " HTTP/1.0\r\n" + secret + "\r\n", 200, true},
		{"negative index", "GET /v1/node/node-1/client-allocs?index=-1 HTTP/1.1\r\nHost: x\r\n" + secret + "Connection: close\r\n\r\n", 400, false},
		{"index not a number", "GET /v1/node/node-1/client-allocs?index=3x HTTP/1.1\r\nHost: x\r\n" + secret + "Connection: close\r\n\r\n", 400, false},
		{"index past uint64", "GET /v1/node/node-1/client-allocs?index=18446744073709551616 HTTP/1.1\r\nHost: x\r\n" + secret + "Connection: close\r\n\r\n", 400, false},
		{"bad wait", "GET " + path + "&wait=forever HTTP/1.1\r\nHost: x\r\n" + secret + "Connection: close\r\n\r\n", 400, false},
		{"unknown node", "GET /v1/node/node-3/client-allocs?index=3 HTTP/1.1\r\nHost: x\r\n" + secret + "\r\n", 404, false},
		{"another node", "GET /v1/node/node-2/client-allocs?index=3 HTTP/1.1\r\nHost: x\r\n" + secret + "\r\n", 403, false},
		{"no secret", "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n", 403, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := pns.waits.Load()
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status && !(tc.status == 403 && resp.StatusCode == 401) {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if waited := pns.waits.Load() > before; waited != tc.waits {
				t.Fatalf("asked for a wait: %v, want %v", waited, tc.waits)
			}
			if p.parkedCount() != 0 {
				t.Fatalf("%d parked", p.parkedCount())
			}
		})
	}
}

// TestParkedRecheckedOnResume: a parked query is authorized again when it
// resumes: a node whose secret changed while it waited (re-registered by
// its owner, or taken back by an operator) gets no allocations on the old
// secret.
func TestParkedRecheckedOnResume(t *testing.T) {
	pns, p, base := parkFixture(t, 10*time.Minute)
	conn := dialParked(t, strings.TrimPrefix(base, "http://"))
	waittest.Until(t, 20*time.Second, "the query parked", func() bool { return p.parkedCount() == 1 })
	pns.mu.Lock()
	n := *pns.nodes["node-1"]
	n.SecretID = "rotated"
	pns.nodes["node-1"] = &n
	pns.mu.Unlock()
	close(pns.wake)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "Allocs") {
		t.Fatalf("resumed on the old secret: %d %s", resp.StatusCode, body)
	}
}
