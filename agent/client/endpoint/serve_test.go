package endpoint

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
)

// rawRequest dials the router and returns the connection and a reader of
// its responses, both bounded by a 10 s deadline.
func rawRequest(t *testing.T, r *Router) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func readBody(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp, string(b)
}

func TestServerPipelinedHeadAndGetOnOneConnection(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	c, br := rawRequest(t, r)
	// Both requests in one write: the second waits in the buffer.
	if _, err := io.WriteString(c, "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body := readBody(t, br, http.MethodHead)
	if resp.StatusCode != http.StatusOK || body != "" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
	}
	resp, body = readBody(t, br, http.MethodGet)
	if resp.StatusCode != http.StatusOK || body != "hello from a0" || resp.Header.Get(MemberHeader) != "a0" {
		t.Fatalf("GET after HEAD: %d %q", resp.StatusCode, body)
	}
	if resp.Close {
		t.Fatal("the connection was closed after two kept-alive requests")
	}
}

func TestServerRefusesBadRequestsAndClosesHTTP10(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	for _, tc := range []struct {
		name, req string
		code      int
	}{
		{"missing Host", "GET /hello HTTP/1.1\r\n\r\n", http.StatusBadRequest},
		{"bad header value", "GET /hello HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", http.StatusBadRequest},
		{"unknown Expect", "GET /hello HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", http.StatusExpectationFailed},
		{"garbage", "NOT HTTP AT ALL\r\n\r\n", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := rawRequest(t, r)
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			resp, _ := readBody(t, br, http.MethodGet)
			if resp.StatusCode != tc.code || !resp.Close {
				t.Fatalf("status %d close %v, want %d and close", resp.StatusCode, resp.Close, tc.code)
			}
		})
	}
	if n := len(fm.requests()); n != 0 {
		t.Fatalf("refused requests reached the member: %v", fm.requests())
	}
	// HTTP/1.0 without keep-alive: answered, then the connection ends.
	c, br := rawRequest(t, r)
	if _, err := io.WriteString(c, "GET /hello HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body := readBody(t, br, http.MethodGet)
	if resp.StatusCode != http.StatusOK || body != "hello from a0" {
		t.Fatalf("HTTP/1.0: %d %q", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after an HTTP/1.0 answer: %v, want EOF", err)
	}
}

func TestServerExpectContinue(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	c, br := rawRequest(t, r)
	if _, err := io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("before the body: %q %v, want 100 Continue", line, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q %v", blank, err)
	}
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	resp, body := readBody(t, br, http.MethodPost)
	if resp.StatusCode != http.StatusOK || body != "hello" {
		t.Fatalf("echo: %d %q", resp.StatusCode, body)
	}
}

func TestClientGoneCancelsItsSlowRequest(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	c, _ := rawRequest(t, r)
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	recvWithin(t, fm.started, 5*time.Second, "the slow request at the member")
	_ = c.Close()
	// The router sees the client go and cuts the member exchange: the
	// member's handler returns through its context, nothing in flight.
	waittest.Until(t, 5*time.Second, "the request to end", func() bool {
		st := r.Status()
		return st.InFlight == 0 && st.Members[0].Outstanding == 0
	})
	if st := r.Status(); st.Failed != 1 || st.Members[0].Failed != 0 {
		t.Fatalf("failed %d, member failed %d: want the request failed, the member not blamed", st.Failed, st.Members[0].Failed)
	}
}

func TestStreamedResponseIsChunkedWhenItHasNoLength(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	c, br := rawRequest(t, r)
	if _, err := io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	recvWithin(t, fm.started, 5*time.Second, "the stream at the member")
	first := make([]byte, len("data: first\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: first\n\n" {
		t.Fatalf("first event %q %v (held back?)", first, err)
	}
	fm.release()
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: second\n\n" {
		t.Fatalf("rest %q %v", rest, err)
	}
}

// FuzzServerRequestBytes sends arbitrary bytes to the router's server: it
// must answer in HTTP/1.1 or close, never hang past its timeouts or panic,
// and keep serving.
func FuzzServerRequestBytes(f *testing.F) {
	for _, s := range []string{
		"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	fm := newFakeMember(f, "a0")
	r := startRouter(f, func(c *Config) {
		c.ReadHeaderTimeout = time.Second
		c.RequestBodyTimeout = time.Second
		c.MaxHeaderBytes = 4 << 10
		c.MaxRequestBodyBytes = 1 << 10
	})
	r.SetMembers(members(fm))
	waitAdmitted(f, r, "a0")
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			_, _ = c.Write(in)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		out, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("reading the answer: %v (%d bytes)", err, len(out))
		}
		if len(out) > 0 && !bytes.HasPrefix(out, []byte("HTTP/1.1 ")) {
			t.Fatalf("answer does not start with a status line: %q", out[:min(len(out), 80)])
		}
	})
}
