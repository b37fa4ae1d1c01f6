package agent

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	agenthttp "github.com/gpulayer/gpulayer/agent/http"
	"github.com/hashicorp/go-hclog"
)

func TestLimitsConfig(t *testing.T) {
	c := DefaultConfig()
	c.Server.Enabled = true
	if got := c.HTTPLimits(); got.MaxConnsPerClient != 100 || got.ReadHeaderTimeout != 10*time.Second ||
		got.HandshakeTimeout != 5*time.Second || got.MaxHeaderBytes != 64<<10 || got.IdleTimeout != 2*time.Minute {
		t.Fatalf("defaults: %+v", got)
	}
	f, err := ParseConfig("agent.hcl", []byte("limits {\n  http_max_conns_per_client = 7\n  https_handshake_timeout = \"2s\"\n  http_read_header_timeout = \"1s\"\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Merge(f)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.HTTPLimits(); got.MaxConnsPerClient != 7 || got.HandshakeTimeout != 2*time.Second || got.ReadHeaderTimeout != time.Second ||
		got.BodyReadTimeout != agenthttp.DefaultBodyReadTimeout {
		t.Fatalf("merged: %+v", got)
	}
	bad, err := ParseConfig("agent.hcl", []byte("limits {\n  http_max_conns_per_client = -5\n  http_idle_timeout = \"soon\"\n  http_max_header_bytes = 99999999999\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Merge(bad)
	err = c.Validate()
	for _, want := range []string{"limits.http_max_conns_per_client", "limits.http_idle_timeout", "limits.http_max_header_bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}

// limitedServer serves h the way the agent does (newHTTPServer and the
// per-client connection limit) with short timeouts, and returns its
// address.
func limitedServer(t *testing.T, h http.Handler, lim HTTPLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h, lim, hclog.NewNullLogger())
	go func() { _ = srv.Serve(agenthttp.LimitConnsPerClient(ln, lim.MaxConnsPerClient, true)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// waitClosed reads c until the server closes it and returns how long that
// took; it fails the test when c is still open after limit.
func waitClosed(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %s", limit)
	}
	return time.Since(start)
}

// TestHTTPSlowloris: a client that sends its headers one byte at a time
// is cut off once the header timeout passes, and one that sends a body
// slowly once the body timeout passes; a normal request still works.
func TestHTTPSlowloris(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	lim := HTTPLimits{MaxConnsPerClient: 100, ReadHeaderTimeout: 300 * time.Millisecond, BodyReadTimeout: 300 * time.Millisecond,
		SnapshotReadTimeout: time.Hour, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	addr := limitedServer(t, ok, lim)

	t.Run("headers", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			req := "GET /v1/status/health HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Slow: a\r\n", 1000)
			for i := 0; i < len(req); i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := c.Write([]byte{req[i]}); err != nil {
					return
				}
			}
		}()
		if took := waitClosed(t, c, 5*time.Second); took > 3*time.Second {
			t.Fatalf("cut off after %s, want about %s", took, lim.ReadHeaderTimeout)
		}
	})
	t.Run("body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for range 1000 {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := c.Write([]byte("a")); err != nil {
					return
				}
			}
		}()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a slow body within 5s: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400 for a body slower than the deadline", resp.StatusCode)
		}
	})
	t.Run("normal", func(t *testing.T) {
		resp, err := http.Post("http://"+addr+"/v1/jobs", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

// TestHTTPConnLimitPerClient: with http_max_conns_per_client = 3, a
// fourth connection from the same IP is answered 429 and closed; closing
// one of the three lets a new one in.
func TestHTTPConnLimitPerClient(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	lim := HTTPLimits{MaxConnsPerClient: 3, ReadHeaderTimeout: 10 * time.Second, BodyReadTimeout: time.Minute,
		SnapshotReadTimeout: time.Hour, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	addr := limitedServer(t, ok, lim)
	get := func(c net.Conn) (int, error) {
		if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var held []net.Conn
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if code, err := get(c); err != nil || code != 200 {
			t.Fatalf("connection %d: %d %v", i+1, code, err)
		}
		held = append(held, c)
	}
	c4, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	_ = c4.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c4), nil)
	if err != nil {
		t.Fatalf("fourth connection: %v, want a 429 answer", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too many open connections") {
		t.Fatalf("fourth connection: %d %s", resp.StatusCode, body)
	}
	waitClosed(t, c4, 5*time.Second)

	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		code, err := get(c)
		c.Close()
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a slot freed by a close was not reused: %d %v", code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
