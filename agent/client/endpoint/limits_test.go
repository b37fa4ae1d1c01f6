package endpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestNewValidatesConfig(t *testing.T) {
	ep := func(mod func(*structs.Endpoint)) *structs.Endpoint {
		e := &structs.Endpoint{Name: "llm", Port: 9000, Model: testModel}
		if mod != nil {
			mod(e)
		}
		return e
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no endpoint", Config{ListenAddr: "127.0.0.1:0"}, "Endpoint: missing"},
		{"no model", Config{Endpoint: ep(func(e *structs.Endpoint) { e.Model = "" }), ListenAddr: "127.0.0.1:0"}, "Endpoint.Model"},
		{"bad policy", Config{Endpoint: ep(func(e *structs.Endpoint) { e.Policy = "random" }), ListenAddr: "127.0.0.1:0"}, "Endpoint.Policy"},
		{"relative models path", Config{Endpoint: ep(func(e *structs.Endpoint) { e.ModelsPath = "v1/models" }), ListenAddr: "127.0.0.1:0"}, "Endpoint.ModelsPath"},
		{"no listen address", Config{Endpoint: ep(nil)}, "ListenAddr: missing"},
		{"listen address without port", Config{Endpoint: ep(nil), ListenAddr: "127.0.0.1"}, "ListenAddr"},
		{"negative timeout", Config{Endpoint: ep(nil), ListenAddr: "127.0.0.1:0", DialTimeout: -time.Second}, "DialTimeout"},
		{"negative limit", Config{Endpoint: ep(nil), ListenAddr: "127.0.0.1:0", MaxConcurrent: -1}, "MaxConcurrent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
	r, err := New(Config{Endpoint: ep(nil), ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.VerifyInterval != DefaultVerifyInterval || r.cfg.MaxConcurrent != DefaultMaxConcurrent ||
		r.ep.ModelsPath != structs.DefaultEndpointModelsPath || r.ep.Policy != structs.EndpointPolicyRoundRobin {
		t.Fatalf("defaults not applied: %+v %+v", r.cfg, r.ep)
	}
}

func TestStartErrorNamesTheAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r, err := New(Config{Endpoint: &structs.Endpoint{Name: "llm", Model: testModel}, ListenAddr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("Start on a taken port: %v, want an error naming %s", err, ln.Addr())
	}
}

func TestInvalidMemberAddressIsRefusedWithReason(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	ms := members(fm)
	ms = append(ms, Member{AllocID: "bad", Index: 1, Addr: "no-port", ChecksPassing: true, Identity: testIdentity},
		Member{AllocID: "a0", Index: 2, Addr: "127.0.0.1:1"}) // a repeated alloc ID is ignored
	r.SetMembers(ms)
	waitAdmitted(t, r, "a0")
	if got := reason(r, "bad"); !strings.HasPrefix(got, `invalid member address "no-port"`) {
		t.Fatalf("reason %q", got)
	}
	if n := len(r.Status().Members); n != 2 {
		t.Fatalf("%d members, want 2", n)
	}
}

func TestHopByHopHeadersRemovedAndForwardedForSet(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/headers", nil)
	req.Header.Set("Connection", "X-Client-Hop")
	req.Header.Set("X-Client-Hop", "drop me")
	req.Header.Set("Keep-Alive", "timeout=9")
	req.Header.Set("Proxy-Authorization", "Basic Zm9vOmJhcg==")
	req.Header.Set("X-Forwarded-For", "10.1.2.3")
	req.Header.Set("Authorization", "Bearer keep-me")
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seen http.Header
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"X-Client-Hop", "Keep-Alive", "Proxy-Authorization"} {
		if v := seen.Get(h); v != "" {
			t.Errorf("member saw hop-by-hop %s: %q", h, v)
		}
	}
	if v := seen.Get("Authorization"); v != "Bearer keep-me" {
		t.Errorf("Authorization %q, want it passed", v)
	}
	if v := seen.Get("X-Forwarded-For"); v != "10.1.2.3, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", v)
	}
	if v := seen.Get("User-Agent"); v != "Go-http-client/1.1" {
		t.Errorf("User-Agent %q, want the client's", v)
	}
	if v := resp.Header.Get("X-Hop"); v != "" {
		t.Errorf("client saw the member's hop-by-hop X-Hop: %q", v)
	}
	if v := resp.Header.Get("Keep-Alive"); v != "" {
		t.Errorf("client saw the member's Keep-Alive: %q", v)
	}
	if v := resp.Header.Get(MemberHeader); v != "a0" {
		t.Errorf("%s %q", MemberHeader, v)
	}
}

func TestRequestBodyPassesAndIsBounded(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, func(c *Config) { c.MaxRequestBodyBytes = 1000 })
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	c := testClient(t)
	post := func(body io.Reader) (int, string) {
		resp, err := c.Post("http://"+r.Addr()+"/echo", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(strings.NewReader(`{"prompt":"hello"}`)); code != http.StatusOK || body != `{"prompt":"hello"}` {
		t.Fatalf("echo: %d %q", code, body)
	}
	// Chunked (no length): streamed through.
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, "part one, ")
		_, _ = io.WriteString(pw, "part two")
		_ = pw.Close()
	}()
	if code, body := post(pr); code != http.StatusOK || body != "part one, part two" {
		t.Fatalf("chunked echo: %d %q", code, body)
	}
	if code, _ := post(strings.NewReader(strings.Repeat("x", 1001))); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body with a length: %d, want 413", code)
	}
	pr, pw = io.Pipe()
	go func() {
		for i := 0; i < 20; i++ {
			if _, err := io.WriteString(pw, strings.Repeat("y", 100)); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	if code, _ := post(pr); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized chunked body: %d, want 413", code)
	}
}

func TestMaxConcurrentRejectsBeyondTheLimit(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, func(c *Config) { c.MaxConcurrent = 1 })
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	done := make(chan int, 1)
	go func() {
		resp, err := testClient(t).Get("http://" + r.Addr() + "/slow")
		if err != nil {
			done <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	recvWithin(t, fm.started, 5*time.Second, "the slow request")
	code, _, _ := get(t, testClient(t), r, "/hello", "over")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("second request: %d, want 503", code)
	}
	if fm.saw("over") != 0 {
		t.Fatal("the rejected request reached the member")
	}
	fm.release()
	if code := recvWithin(t, done, 5*time.Second, "the slow request"); code != http.StatusOK {
		t.Fatalf("slow request %d", code)
	}
	if st := r.Status(); st.Rejected != 1 {
		t.Fatalf("rejected %d, want 1", st.Rejected)
	}
}

func TestSlowlorisClientIsCutByReadHeaderTimeout(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, func(c *Config) { c.ReadHeaderTimeout = 200 * time.Millisecond })
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	conn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn) // the server closes the connection
	if err != nil {
		t.Fatalf("reading: %v (the header timeout did not close the connection)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("connection closed after %s", d)
	}
	if len(fm.requests()) != 0 {
		t.Fatal("a partial request reached the member")
	}
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, func(c *Config) { c.MaxHeaderBytes = 4 << 10 })
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	conn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("b", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
	if len(fm.requests()) != 0 {
		t.Fatal("the oversized request reached the member")
	}
}

func TestMaxConnsBoundsOpenConnections(t *testing.T) {
	r := startRouter(t, func(c *Config) { c.MaxConns = 2 })
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The third connection waits in the accept queue: its request is
	// not answered while two connections are held.
	c3, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_, _ = io.WriteString(c3, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c3.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [1]byte
	if _, err := c3.Read(b[:]); err == nil {
		t.Fatal("a third connection was served beyond MaxConns 2")
	}
	conns[0].Close()
	_ = c3.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c3), nil)
	if err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable { // no members
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestListsModel(t *testing.T) {
	tests := []struct {
		body string
		want string // "" for listed
	}{
		{`{"object":"list","data":[{"id":"a"},{"id":"llama-3-8b","object":"model"}]}`, ""},
		{`{"data":[{"id":"llama-3-8b"}]}`, ""},
		{`{"object":"list","data":[{"id":"other"}]}`, `model "llama-3-8b" not listed (1 models listed)`},
		{`{"object":"list","data":[]}`, `not listed (0 models listed)`},
		{`{"object":"model","id":"llama-3-8b"}`, `object is "model"`},
		{`[1,2]`, "not an OpenAI models listing"},
		{`not json`, "not an OpenAI models listing"},
	}
	for _, tc := range tests {
		err := listsModel([]byte(tc.body), testModel)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
}

func FuzzListsModel(f *testing.F) {
	f.Add([]byte(`{"object":"list","data":[{"id":"llama-3-8b"}]}`), "llama-3-8b")
	f.Add([]byte(`{"data":[{"id":1}]}`), "x")
	f.Add([]byte(`{"object":"list","data":null}`), "")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		err := listsModel(body, model)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("listed %q in invalid JSON %q", model, body)
		}
		// Without escapes in the body, a listed name appears verbatim.
		if !bytes.ContainsRune(body, '\\') && !bytes.Contains(body, []byte(`"`+model+`"`)) {
			t.Fatalf("listed %q, absent from %q", model, body)
		}
	})
}

func TestLifecycle(t *testing.T) {
	cfg := Config{Endpoint: &structs.Endpoint{Name: "llm", Model: testModel}, ListenAddr: "127.0.0.1:0"}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Addr() != "127.0.0.1:0" {
		t.Fatalf("Addr before Start %q", r.Addr())
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
	if err := r.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}

	r, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	addr := r.Addr()
	if addr == "127.0.0.1:0" {
		t.Fatal("Addr after Start still has port 0")
	}
	// Cancelling Start's context closes the router.
	cancel()
	waittest.Until(t, 5*time.Second, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	})
}

func TestSlowRequestBodyIsCut(t *testing.T) {
	fm, other := newFakeMember(t, "a0"), newFakeMember(t, "a1")
	r := startRouter(t, func(c *Config) { c.RequestBodyTimeout = 200 * time.Millisecond })
	r.SetMembers(members(fm, other))
	waitAdmitted(t, r, "a0", "a1")
	conn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// 100 bytes announced, 10 sent, then nothing.
	if _, err := io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	// The headers were sent before the body stalled: the member saw the
	// request start, and no other member saw it.
	if a, b := fm.saw(""), other.saw(""); a != 1 || b != 0 {
		t.Fatalf("members saw the request %d and %d times, want 1 and 0", a, b)
	}
}
