package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftHandshakeTimeout bounds a Raft connection's TLS handshake.
const raftHandshakeTimeout = 10 * time.Second

// RaftTLS runs Raft over mutual TLS (Config.RaftTLS). agent/tlsutil makes
// both from the agent's tls block.
type RaftTLS struct {
	// Server is the Raft listener's configuration. It must require a
	// client certificate and accept only one for
	// "server.<region>.gpulayer" (tlsutil Bundle.RaftServer).
	Server *tls.Config
	// Client is the configuration Raft dials peers with. It must present
	// this server's certificate and verify the peer's as
	// "server.<region>.gpulayer" (tlsutil Bundle.RaftClient).
	Client *tls.Config
}

// raftStreamLayer is the raft.StreamLayer of a server's TCP transport.
// With TLS it does a mutual TLS handshake on every accepted and dialed
// connection, so a peer without a server certificate of the cluster's CA
// cannot send or answer a single RPC. Without TLS it accepts connections
// only from IP addresses of known servers (allow), which keeps off a
// stranger on the network but not someone on a server's host or address:
// TLS is the authentication, this is a fence.
type raftStreamLayer struct {
	ln     net.Listener
	adv    net.Addr
	tls    *RaftTLS
	allow  func(net.IP) bool
	logger hclog.Logger
}

// newRaftStreamLayer listens on bind. adv, when set, is the address other
// servers dial; otherwise the listener's, which must then not be 0.0.0.0.
func newRaftStreamLayer(bind string, adv net.Addr, t *RaftTLS, allow func(net.IP) bool, logger hclog.Logger) (*raftStreamLayer, error) {
	if t != nil && (t.Server == nil || t.Client == nil) {
		return nil, fmt.Errorf("raft: %w: RaftTLS needs both a server and a client configuration", structs.ErrInvalid)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	l := &raftStreamLayer{ln: ln, adv: adv, tls: t, allow: allow, logger: logger}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		_ = ln.Close()
		return nil, fmt.Errorf("raft: %w: %s is not an address other servers can dial (set an advertise address)", structs.ErrInvalid, l.Addr())
	}
	return l, nil
}

// Accept returns the next connection of a peer that may be a server:
// without TLS, connections from unknown IP addresses are closed at once
// and logged; with TLS the connection's first read or write runs the
// handshake, which fails for any certificate but a server's.
func (l *raftStreamLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		if l.tls != nil {
			return &handshakeConn{Conn: tls.Server(c, l.tls.Server), logger: l.logger}, nil
		}
		if l.allow != nil {
			ip := remoteIP(c)
			if ip == nil || !l.allow(ip) {
				l.logger.Warn("refused a raft connection from an address that is not a known server (run raft over TLS, tls.rpc = true, to authenticate servers)", "remote", c.RemoteAddr())
				_ = c.Close()
				continue
			}
		}
		return c, nil
	}
}

// Close stops the listener.
func (l *raftStreamLayer) Close() error { return l.ln.Close() }

// Addr is the advertised address, or the listener's.
func (l *raftStreamLayer) Addr() net.Addr {
	if l.adv != nil {
		return l.adv
	}
	return l.ln.Addr()
}

// Dial connects to a peer's Raft address; with TLS it completes the
// handshake (the peer must prove it is a server) before returning.
func (l *raftStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if l.tls == nil {
		return c, nil
	}
	tc := tls.Client(c, l.tls.Client)
	if timeout <= 0 || timeout > raftHandshakeTimeout {
		timeout = raftHandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft: TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}

// handshakeConn runs the server side of the TLS handshake on first use,
// in the transport's per-connection goroutine rather than in Accept, so a
// peer that never speaks cannot stall other connections.
type handshakeConn struct {
	*tls.Conn
	logger hclog.Logger
	once   sync.Once
	err    error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), raftHandshakeTimeout)
		defer cancel()
		if err := c.Conn.HandshakeContext(ctx); err != nil {
			c.err = fmt.Errorf("raft: TLS handshake with %s: %w", c.RemoteAddr(), err)
			c.logger.Warn("refused a raft connection without a server certificate", "remote", c.RemoteAddr(), "error", err)
			_ = c.Conn.Close()
		}
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func remoteIP(c net.Conn) net.IP {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP
	}
	return nil
}

// raftPeerAllowed reports whether ip is the address of a server this one
// knows: one in the Raft configuration, in Config.BootstrapPeers, or a
// server gossip member (its Raft or gossip address). It resolves host
// names in those addresses with a short timeout.
func (s *Server) raftPeerAllowed(ip net.IP) bool {
	var addrs []string
	if r := s.fenceRaft.Load(); r != nil {
		f := r.GetConfiguration()
		if err := f.Error(); err == nil {
			for _, srv := range f.Configuration().Servers {
				addrs = append(addrs, string(srv.Address))
			}
		}
	}
	for _, p := range s.config.BootstrapPeers {
		addrs = append(addrs, string(p.Address))
	}
	if ms := s.fenceMembers.Load(); ms != nil {
		for _, m := range ms.snapshot() {
			if m.Status == MemberAlive {
				addrs = append(addrs, m.RaftAddr, m.Addr)
			}
		}
	}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if hip := net.ParseIP(host); hip != nil {
			if hip.Equal(ip) {
				return true
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		cancel()
		if err != nil {
			continue
		}
		for _, x := range ips {
			if x.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// errRaftTLSInMemory is returned when RaftTLS is set with a Transport.
var errRaftTLSInMemory = errors.New("RaftTLS applies to the TCP transport only; unset Transport")

// raftPeerProbeTimeout bounds the TLS probe of a server's Raft address.
const raftPeerProbeTimeout = 5 * time.Second

// verifyRaftPeer proves, with Raft over TLS, that the process at addr holds
// a server certificate of the cluster's CA, by completing a TLS handshake
// with the Raft client configuration (which checks the name
// "server.<region>.gpulayer") and closing the connection. Gossip meta is
// only a claim: the leader calls this before it adds a gossip member as a
// voter, and bootstrap before it counts one, so a member that has the
// gossip key but a client certificate never becomes a Raft peer. Without
// RaftTLS there is nothing to prove; it still requires the address to
// accept a TCP connection, so a member advertising an address nobody
// answers on cannot become a voter that costs the cluster its quorum.
// With a Config.Transport (in-memory tests) it returns nil.
func (s *Server) verifyRaftPeer(addr string) error {
	if s.config.Transport != nil {
		return nil
	}
	d := &net.Dialer{Timeout: raftPeerProbeTimeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return fmt.Errorf("dial raft address %s: %w", addr, err)
	}
	defer c.Close()
	t := s.config.RaftTLS
	if t == nil {
		return nil
	}
	tc := tls.Client(c, t.Client)
	ctx, cancel := context.WithTimeout(context.Background(), raftPeerProbeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("raft address %s did not prove a server certificate: %w", addr, err)
	}
	return nil
}
