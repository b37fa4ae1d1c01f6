package endpoint

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// rawMember is a member speaking HTTP/1.1 by hand: it answers the models
// listing properly and hands every other request, with its connection,
// to serve, which may answer anything at all.
type rawMember struct {
	ln    net.Listener
	serve func(c net.Conn, req *http.Request)
}

func newRawMember(t *testing.T, serve func(c net.Conn, req *http.Request)) *rawMember {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rm := &rawMember{ln: ln, serve: serve}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go rm.conn(c)
		}
	}()
	return rm
}

func (rm *rawMember) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == structs.DefaultEndpointModelsPath {
			body := fmt.Sprintf(`{"object":"list","data":[{"id":%q}]}`, testModel)
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
				return
			}
			continue
		}
		rm.serve(c, req)
		return
	}
}

func (rm *rawMember) member(id string) Member {
	return Member{AllocID: id, Addr: rm.ln.Addr().String(), Identity: testIdentity, ChecksPassing: true}
}

// TestMemberResponseHeaderBombIsBounded: a member (any job's code) that
// answers with headers that never end must not make the router, which
// lives in the client agent's process, read and buffer them without
// bound: the router stops reading after MaxResponseHeaderBytes and
// answers 502.
func TestMemberResponseHeaderBombIsBounded(t *testing.T) {
	const bomb = 64 << 20
	var written atomic.Int64
	done := make(chan struct{})
	rm := newRawMember(t, func(c net.Conn, _ *http.Request) {
		defer close(done)
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Bomb: "); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("a", 64<<10))
		for written.Load() < bomb {
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			n, err := c.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		// Hold the connection open, headers unfinished.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Read(make([]byte, 1))
	})
	r := startRouter(t, func(c *Config) { c.ResponseHeaderTimeout = 10 * time.Second })
	r.SetMembers([]Member{rm.member("a0")})
	waitAdmitted(t, r, "a0")
	code, _, body := get(t, testClient(t), r, "/v1/chat/completions", "bomb")
	if code != http.StatusBadGateway {
		t.Errorf("status %d (%s), want 502", code, body)
	}
	recvWithin(t, done, 20*time.Second, "the member's writer to stop")
	if w := written.Load(); w >= bomb {
		t.Fatalf("the router read all %d bytes of the member's unfinished headers; want it to stop near %d", w, MaxResponseHeaderBytes)
	}
}

// TestVerifierStaysOnTheMember: the live verification never leaves the
// member's address, whatever the models path or the member's answer: a
// path shaped like a network-path reference ("//host/x") or holding an
// "@" goes to the member as a path, and a redirect to a server that does
// list the model is not followed (the member is refused).
func TestVerifierStaysOnTheMember(t *testing.T) {
	var elsewhere atomic.Int64
	other := newRawMember(t, func(c net.Conn, _ *http.Request) { elsewhere.Add(1) })
	otherAddr := other.ln.Addr().String()
	for _, mp := range []string{"//" + otherAddr + "/v1/models", "/@" + otherAddr + "/v1/models", "/..//" + otherAddr + "/v1/models"} {
		var seen atomic.Pointer[string]
		rm := newRawMember(t, func(c net.Conn, req *http.Request) {
			u := req.RequestURI
			seen.Store(&u)
			body := fmt.Sprintf(`{"data":[{"id":%q}]}`, testModel)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		})
		r := startRouter(t, func(c *Config) { c.Endpoint.ModelsPath = mp })
		r.SetMembers([]Member{rm.member("a0")})
		waitAdmitted(t, r, "a0")
		if got := seen.Load(); got == nil || *got != mp {
			t.Errorf("models path %q: the member saw %v", mp, got)
		}
	}
	// A member whose listing redirects to another server that lists the
	// model.
	var listed atomic.Int64
	lister := newRawMemberListing(t, func(c net.Conn) {
		listed.Add(1)
		body := fmt.Sprintf(`{"data":[{"id":%q}]}`, testModel)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
	rd := newRawMemberListing(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 302 Found\r\nLocation: http://%s/v1/models\r\nContent-Length: 0\r\n\r\n", lister.Addr())
	})
	r := startRouter(t, nil)
	r.SetMembers([]Member{{AllocID: "a0", Addr: rd.Addr().String(), Identity: testIdentity, ChecksPassing: true}})
	waitReason(t, r, "a0", "status 302")
	if n := elsewhere.Load() + listed.Load(); n != 0 {
		t.Fatalf("the verifier reached another host %d times", n)
	}
}

// newRawMemberListing is a member whose models listing is answered by
// listing, on every connection, for every request.
func newRawMemberListing(t *testing.T, listing func(c net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					listing(c)
				}
			}()
		}
	}()
	return ln
}

// waitReason waits until member id is refused with a reason holding want.
func waitReason(t *testing.T, r *Router, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := reason(r, id)
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s: reason %q, want it to hold %q", id, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestVerifierBoundsTheListing: a giant listing, a listing that never
// ends and one that trickles are refused with a reason, within the
// verification timeout.
func TestVerifierBoundsTheListing(t *testing.T) {
	giant := newRawMemberListing(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n{\"data\":[", 64<<20)
		chunk := []byte(strings.Repeat(`{"id":"x"},`, 4096))
		for i := 0; i < (64<<20)/len(chunk); i++ {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	trickle := newRawMemberListing(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := 0; i < 100; i++ {
			if _, err := io.WriteString(c, "1\r\n \r\n"); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	hdrs := newRawMemberListing(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Bomb: ")
		chunk := []byte(strings.Repeat("a", 64<<10))
		for i := 0; i < 1024; i++ {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	r := startRouter(t, func(c *Config) { c.VerifyTimeout = 500 * time.Millisecond })
	r.SetMembers([]Member{
		{AllocID: "giant", Index: 0, Addr: giant.Addr().String(), Identity: testIdentity, ChecksPassing: true},
		{AllocID: "trickle", Index: 1, Addr: trickle.Addr().String(), Identity: testIdentity, ChecksPassing: true},
		{AllocID: "hdrs", Index: 2, Addr: hdrs.Addr().String(), Identity: testIdentity, ChecksPassing: true},
	})
	waitReason(t, r, "giant", "larger than")
	waitReason(t, r, "trickle", "GET /v1/models")
	waitReason(t, r, "hdrs", "GET /v1/models")
	t.Logf("reasons: giant %q; trickle %q; hdrs %q", reason(r, "giant"), reason(r, "trickle"), reason(r, "hdrs"))
}

// rawExchange writes raw to the router on one connection and returns
// the status lines, headers and bodies of up to n responses, stopping
// early when the router closes the connection. (It does not half-close:
// net/http takes a client's EOF for the client gone.)
func rawExchange(t *testing.T, r *Router, raw string, n int) string {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out strings.Builder
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(&out, "%s %s\n", resp.Proto, resp.Status)
		_ = resp.Header.Write(&out)
		fmt.Fprintf(&out, "\n%s\n", b)
		if resp.Close {
			break
		}
	}
	return out.String()
}

// TestRequestSmugglingShapesDoNotDesync: ambiguous framings are refused
// or read one way, the member sees exactly the requests the router
// parsed, pipelined requests are answered in order, and an Upgrade never
// reaches the member.
func TestRequestSmugglingShapesDoNotDesync(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	cases := []struct {
		name, raw string
		// wantLog is the member's log after the exchange.
		wantLog []string
		// wantIn are strings the router's answer holds, in order.
		wantIn []string
	}{
		// net/http reads the body chunked and drops Content-Length
		// (RFC 9112 6.3); the member gets it chunked, so both read the
		// same two requests.
		{"CL and TE both", "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test-Req: cl-te\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\nX-Test-Req: second\r\n\r\n",
			[]string{"POST /echo cl-te", "GET /hello second"}, []string{"200 OK", "hello", "200 OK", "hello from a0"}},
		{"two Content-Lengths", "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test-Req: cl-cl\r\nContent-Length: 4\r\nContent-Length: 30\r\n\r\nabcdGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
			nil, []string{"400 Bad Request"}},
		{"TE with a space before the colon", "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test-Req: te-space\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\nabcd",
			nil, []string{"400 Bad Request"}},
		// The router's own serve loop refuses a transfer coding it does
		// not implement with 400 (http.Server said 501); either way the
		// member sees nothing.
		{"TE chunked, identity", "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test-Req: te-list\r\nTransfer-Encoding: chunked, identity\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
			nil, []string{"400 Bad Request"}},
		{"pipelined", "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test-Req: p1\r\nContent-Length: 5\r\n\r\nfirstPOST /echo HTTP/1.1\r\nHost: x\r\nX-Test-Req: p2\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\nGET /hello HTTP/1.0\r\nX-Test-Req: p3\r\nConnection: keep-alive\r\n\r\n",
			[]string{"POST /echo p1", "POST /echo p2", "GET /hello p3"}, []string{"200 OK", "first", "200 OK", "second", "200 OK", "hello from a0"}},
		// An obs-fold is unfolded into the value: one header line, no
		// Transfer-Encoding, reaches the member.
		{"header injection by obs-fold", "GET /headers HTTP/1.1\r\nHost: x\r\nX-Test-Req: fold\r\nX-A: a\r\n Transfer-Encoding: chunked\r\n\r\n",
			[]string{"GET /headers fold"}, []string{"200 OK", `"X-A":["a Transfer-Encoding: chunked"]`}},
		{"upgrade", "GET /headers HTTP/1.1\r\nHost: x\r\nX-Test-Req: up\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
			[]string{"GET /headers up"}, []string{"200 OK", "Sec-Websocket-Key"}},
	}
	for _, tc := range cases {
		before := len(fm.requests())
		got := rawExchange(t, r, tc.raw, max(1, len(tc.wantIn)/2))
		log := fm.requests()[before:]
		if fmt.Sprint(log) != fmt.Sprint(append([]string{}, tc.wantLog...)) {
			t.Errorf("%s: member saw %q, want %q (router answered %q)", tc.name, log, tc.wantLog, got)
		}
		rest := got
		for _, w := range tc.wantIn {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: answer %q lacks %q (in order)", tc.name, got, w)
				break
			}
			rest = rest[i+len(w):]
		}
		if strings.Contains(got, "101 Switching") || strings.Contains(strings.ToLower(got), "\r\nupgrade: websocket") {
			t.Errorf("%s: upgrade relayed: %q", tc.name, got)
		}
	}
}

// TestUnlistenFreesThePortWhileInFlightRequestsFinish: after Unlisten the
// port binds again at once, the request in flight still gets its answer,
// and Close then drains without an error.
func TestUnlistenFreesThePortWhileInFlightRequestsFinish(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	c := testClient(t)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/slow", nil)
		req.Header.Set(reqIDHeader, "inflight")
		resp, err := c.Do(req)
		if err != nil {
			got <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(b)}
	}()
	recvWithin(t, fm.started, 10*time.Second, "the request at the member")
	if err := r.Unlisten(); err != nil {
		t.Fatalf("Unlisten: %v", err)
	}
	ln, err := net.Listen("tcp", r.Addr())
	if err != nil {
		t.Fatalf("port not free after Unlisten: %v", err)
	}
	_ = ln.Close()
	fm.release()
	if a := recvWithin(t, got, 10*time.Second, "the in-flight answer"); a.code != http.StatusOK || a.body != "slow from a0" {
		t.Fatalf("in-flight request: %d %q", a.code, a.body)
	}
	if err := r.Unlisten(); err != nil {
		t.Fatalf("second Unlisten: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close after Unlisten: %v", err)
	}
}

// TestMemberTrailerBombIsBounded: trailers after a chunked body are
// headers too; a member sending trailers that never end is cut after
// MaxResponseHeaderBytes, and the client's connection with it.
func TestMemberTrailerBombIsBounded(t *testing.T) {
	const bomb = 64 << 20
	var written atomic.Int64
	done := make(chan struct{})
	rm := newRawMember(t, func(c net.Conn, _ *http.Request) {
		defer close(done)
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Bomb: "); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("a", 64<<10))
		for written.Load() < bomb {
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			n, err := c.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Read(make([]byte, 1))
	})
	r := startRouter(t, nil)
	r.SetMembers([]Member{rm.member("a0")})
	waitAdmitted(t, r, "a0")
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/v1/chat/completions", nil)
	resp, err := testClient(t).Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Errorf("the response with the endless trailer read as complete")
	}
	recvWithin(t, done, 20*time.Second, "the member's writer to stop")
	if w := written.Load(); w >= bomb {
		t.Fatalf("the router read all %d bytes of the member's endless trailer; want it to stop near %d", w, MaxResponseHeaderBytes)
	}
}

// TestTrailersPassThrough: a member's trailers, declared or not, reach
// the client after the body.
func TestTrailersPassThrough(t *testing.T) {
	rm := newRawMember(t, func(c net.Conn, _ *http.Request) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTrailer: X-Usage\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Usage: 42 tokens\r\n\r\n")
	})
	r := startRouter(t, nil)
	r.SetMembers([]Member{rm.member("a0")})
	waitAdmitted(t, r, "a0")
	resp, err := testClient(t).Get("http://" + r.Addr() + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "hello world" {
		t.Fatalf("body %q, %v", b, err)
	}
	if v := resp.Trailer.Get("X-Usage"); v != "42 tokens" {
		t.Fatalf("trailer X-Usage %q (trailers %v)", v, resp.Trailer)
	}
}

// TestEarlyMemberAnswerIsRelayed: a member that answers before reading a
// large request body (413, 401) and closes makes the router's write fail
// part way; the client must get the member's answer, not a 502 that
// blames the member.
func TestEarlyMemberAnswerIsRelayed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path == structs.DefaultEndpointModelsPath {
					body := fmt.Sprintf(`{"data":[{"id":%q}]}`, testModel)
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
					return
				}
				// Answer at once, the body unread, and close.
				io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!")
			}()
		}
	}()
	r := startRouter(t, nil)
	r.SetMembers([]Member{{AllocID: "a0", Addr: ln.Addr().String(), Identity: testIdentity, ChecksPassing: true}})
	waitAdmitted(t, r, "a0")
	// A raw client that reads the answer while it still writes the body:
	// Go's http.Client may report its own write error (the router stops
	// reading once it has the member's answer) before it reads the
	// answer, which would make this test race the client, not the router.
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	const size = 32 << 20
	go func() {
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return // the router stopped reading: expected
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "too big!" {
		t.Fatalf("status %d body %q, want the member's 413 \"too big!\"", resp.StatusCode, b)
	}
	if got := resp.Header.Get(MemberHeader); got != "a0" {
		t.Fatalf("%s %q", MemberHeader, got)
	}
	for _, m := range r.Status().Members {
		if m.Failed != 0 {
			t.Fatalf("member blamed for its own early answer: %d failures", m.Failed)
		}
	}
}
