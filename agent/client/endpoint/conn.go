package endpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// The router's client side is its own: a pool of HTTP/1.1 connections per
// member, each used by one request at a time from the handler's goroutine.
// net/http's Transport would do, but it replays a request on its own
// (idempotent methods on a reused connection that broke before the first
// response byte), which the endpoint's no-replay rule forbids. Owning the
// connection also tells exactly whether any byte of a request was written.

// errPoolClosed says the member left the set.
var errPoolClosed = errors.New("member removed")

// poolConfig configures a connPool.
type poolConfig struct {
	addr        string
	dialTimeout time.Duration
	maxIdle     int
	idleTimeout time.Duration
	now         func() time.Time
}

// connPool holds one member's idle kept-alive connections, most recently
// used last.
type connPool struct {
	cfg    poolConfig
	dialer net.Dialer

	mu     sync.Mutex
	idle   []*pconn
	closed bool
}

// pconn is one connection to a member.
type pconn struct {
	conn      net.Conn
	cw        countWriter
	lr        limitReader // beneath br: bounds the response headers
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// countWriter counts the bytes written to the connection since reset.
type countWriter struct {
	c net.Conn
	n int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	n, err := w.c.Write(p)
	w.n += int64(n)
	return n, err
}

// errResponseHeaderTooLarge is the error of reading a member's response
// headers (1xx responses included) past MaxResponseHeaderBytes.
var errResponseHeaderTooLarge = fmt.Errorf("member response headers larger than %d bytes", MaxResponseHeaderBytes)

// limitReader reads from c at most left bytes while left is not negative;
// after that its reads fail with errResponseHeaderTooLarge. net/http's
// Transport bounds response headers the same way (persistConn.readLimit):
// http.ReadResponse itself reads header lines of any length.
type limitReader struct {
	c    net.Conn
	left int64 // < 0: unbounded
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.c.Read(p)
	}
	if l.left == 0 {
		return 0, errResponseHeaderTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.c.Read(p)
	l.left -= int64(n)
	return n, err
}

func newConnPool(cfg poolConfig) *connPool {
	return &connPool{cfg: cfg, dialer: net.Dialer{Timeout: cfg.dialTimeout, KeepAlive: 30 * time.Second}}
}

// get returns an idle connection that is still open, or a new one. Its
// error means nothing was written to the member.
func (p *connPool) get(ctx context.Context) (*pconn, error) {
	now := p.cfg.now()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errPoolClosed
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		pc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if now.Sub(pc.idleSince) < p.cfg.idleTimeout && pc.br.Buffered() == 0 && connAlive(pc.conn) {
			pc.cw.n = 0
			return pc, nil
		}
		_ = pc.conn.Close()
	}
	c, err := p.dialer.DialContext(ctx, "tcp", p.cfg.addr)
	if err != nil {
		return nil, err
	}
	pc := &pconn{conn: c}
	fc := fastConn(c)
	pc.cw.c = fc
	pc.lr = limitReader{c: fc, left: -1}
	pc.br = bufio.NewReaderSize(&pc.lr, 4<<10)
	pc.bw = bufio.NewWriterSize(&pc.cw, 4<<10)
	return pc, nil
}

// put returns a connection whose last exchange completed to the pool, or
// closes it when the pool is full or closed.
func (p *connPool) put(pc *pconn) {
	if err := pc.conn.SetDeadline(time.Time{}); err != nil {
		_ = pc.conn.Close()
		return
	}
	pc.idleSince = p.cfg.now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.cfg.maxIdle {
		p.mu.Unlock()
		_ = pc.conn.Close()
		return
	}
	p.idle = append(p.idle, pc)
	p.mu.Unlock()
}

// sweep closes the idle connections older than the idle timeout.
func (p *connPool) sweep() {
	now := p.cfg.now()
	p.mu.Lock()
	keep := p.idle[:0]
	var drop []*pconn
	for _, pc := range p.idle {
		if now.Sub(pc.idleSince) >= p.cfg.idleTimeout {
			drop = append(drop, pc)
		} else {
			keep = append(keep, pc)
		}
	}
	for i := len(keep); i < len(p.idle); i++ {
		p.idle[i] = nil
	}
	p.idle = keep
	p.mu.Unlock()
	for _, pc := range drop {
		_ = pc.conn.Close()
	}
}

// close closes the idle connections; connections in use are closed when
// their request ends.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.closed = true
	p.mu.Unlock()
	for _, pc := range idle {
		_ = pc.conn.Close()
	}
}

// limitListener bounds the connections accepted and not yet closed.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
	err  error // of the first Close
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener once (Unlisten, then the server's Shutdown);
// later calls return the first call's result.
func (l *limitListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.err = l.Listener.Close()
	})
	return l.err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
