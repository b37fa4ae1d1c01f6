package http

import (
	"bufio"
	"io"
	"net"
	"net/http"
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
