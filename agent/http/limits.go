package http

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the agent's `limits` block (agent/config_limits.go), also
// used when a field is zero.
const (
	// DefaultMaxConnsPerClient is Nomad's http_max_conns_per_client: 100
	// open connections from one IP address.
	DefaultMaxConnsPerClient = 100
	// DefaultReadHeaderTimeout bounds the time a client may take to send
	// a request's line and headers: 10 s (a slowloris client sends them
	// a byte at a time).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyReadTimeout bounds the time a client may take to send a
	// request body (at most 1 MiB outside snapshot restore): 60 s.
	DefaultBodyReadTimeout = 60 * time.Second
	// DefaultSnapshotReadTimeout bounds the upload of PUT
	// /v1/operator/snapshot (up to MaxSnapshotBytes): 1 h.
	DefaultSnapshotReadTimeout = time.Hour
	// DefaultIdleTimeout closes a keep-alive connection that carried no
	// request for 2 minutes.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes caps a request's line and headers: 64 KiB.
	DefaultMaxHeaderBytes = 64 << 10
)

// WithBodyDeadline returns next behind a per-request read deadline on the
// body: bodyTimeout after the headers arrived (DefaultBodyReadTimeout when
// zero), snapshotTimeout for PUT /v1/operator/snapshot
// (DefaultSnapshotReadTimeout when zero; artifact uploads, PUT
// /v1/artifact/sha256/{hex}, get the same), and none for routes whose body is
// a stream that lives as long as the session (POST
// /v1/allocation/{id}/exec, stdin of `alloc exec`). A client that sends its
// body slower than that gets a read error (400 or 413) and the connection
// is closed. A request without a body gets no deadline. Responses are not
// bounded: blocking queries, log follow and the event stream write for as
// long as they run.
//
// The http.Server must leave ReadTimeout zero (ReadHeaderTimeout bounds the
// headers), or the server's own deadline would cut the exec stream.
func WithBodyDeadline(next http.Handler, bodyTimeout, snapshotTimeout time.Duration) http.Handler {
	if bodyTimeout <= 0 {
		bodyTimeout = DefaultBodyReadTimeout
	}
	if snapshotTimeout <= 0 {
		snapshotTimeout = DefaultSnapshotReadTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := bodyTimeout
		switch {
		case streamingBody(r):
			d = 0
		case r.Method == http.MethodPut && r.URL.Path == "/v1/operator/snapshot":
			d = snapshotTimeout
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/artifact/sha256/"):
			// An artifact upload (up to limits.artifact_max_bytes, 8 GiB
			// by default) gets the snapshot upload's bound, 1 h.
			d = snapshotTimeout
		}
		if r.Body == http.NoBody {
			// Nothing to read (a GET): a read deadline would bound
			// nothing but the connection's background read, and its
			// expiry cancels the request's context, cutting a
			// blocking query (clients wait up to 5 minutes) at d.
			d = 0
		}
		if d > 0 {
			// An error means the writer cannot set deadlines (a test
			// recorder); there is no connection to protect then.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// streamingBody reports whether r's body is a stream without an end known
// up front: the stdin frames of an exec session, or Nomad's exec
// WebSocket (exec_ws.go).
func streamingBody(r *http.Request) bool {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/client/allocation/") && strings.HasSuffix(r.URL.Path, "/exec") {
		return true
	}
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/allocation/") && strings.HasSuffix(r.URL.Path, "/exec")
}

// LimitConnsPerClient wraps ln so that one remote IP address holds at most
// max open connections (DefaultMaxConnsPerClient when max is zero; no limit
// when max is negative), as Nomad's limits { http_max_conns_per_client }.
// A connection past the limit is answered "429 Too Many Requests" with a
// JSON error and closed when answer is true (plain HTTP), or closed at once
// when false (put TLS above this listener, which cannot speak before the
// handshake). Connections close and free their slot whoever closes them.
func LimitConnsPerClient(ln net.Listener, max int, answer bool) net.Listener {
	if max == 0 {
		max = DefaultMaxConnsPerClient
	}
	if max < 0 {
		return ln
	}
	return &connLimitListener{Listener: ln, max: max, answer: answer, open: map[string]int{}}
}

type connLimitListener struct {
	net.Listener
	max    int
	answer bool

	mu   sync.Mutex
	open map[string]int // remote IP -> open connections
}

// tooManyConns is the answer to a connection past the limit.
var tooManyConns = func() string {
	body := `{"error":"too many open connections from your address; close some or raise the limit"}` + "\n"
	return "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// Accept returns the next connection within its IP's limit; connections
// past it are refused here and never reach the server.
func (l *connLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		n := l.open[ip]
		if n >= l.max {
			l.mu.Unlock()
			go l.refuse(c)
			continue
		}
		l.open[ip] = n + 1
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *connLimitListener) refuse(c net.Conn) {
	if l.answer {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte(tooManyConns))
	}
	_ = c.Close()
}

func (l *connLimitListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] <= 1 {
		delete(l.open, ip)
		return
	}
	l.open[ip]--
}

// remoteIP is c's remote IP address without the port.
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// limitedConn frees its slot once, on the first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the connection c wraps (the Parker looks at its socket).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }
