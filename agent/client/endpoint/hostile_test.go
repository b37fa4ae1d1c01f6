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
