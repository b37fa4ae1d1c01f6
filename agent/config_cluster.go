package agent

import (
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/server"
)

// validateCluster checks the settings of a multi-server cluster and of a
// client-only agent, returning one message per problem, each naming the
// field.
func (c *Config) validateCluster() []string {
	var p []string
	if c.Addresses != nil && c.Addresses.HTTP != "" && net.ParseIP(c.Addresses.HTTP) == nil {
		p = append(p, fmt.Sprintf("addresses.http: %q is not an IP address", c.Addresses.HTTP))
	}
	if c.Server.Encrypt != "" {
		if _, err := decodeGossipKey(c.Server.Encrypt); err != nil {
			p = append(p, "server.encrypt: "+err.Error())
		}
	}
	for i, addr := range c.Server.RetryJoin {
		if _, err := normalizeJoinAddr(addr, c.Ports.Serf); err != nil {
			p = append(p, fmt.Sprintf("server.retry_join[%d]: %v", i, err))
		}
	}
	p = append(p, c.validateGossipAuth()...)
	if m := c.Server.RaftMultiplier; m < 0 || m > server.MaxRaftMultiplier {
		p = append(p, fmt.Sprintf("server.raft_multiplier: want 1 to %d, got %d", server.MaxRaftMultiplier, m))
	}
	if c.DevMode && c.Server.BootstrapExpect > 1 {
		p = append(p, fmt.Sprintf("server.bootstrap_expect: dev mode runs one server, got %d", c.Server.BootstrapExpect))
	}
	if c.Client.Enabled && !c.Server.Enabled && len(c.Client.Servers) == 0 {
		p = append(p, "client.servers: a client without a local server needs at least one server address (-servers=host:4656,...)")
	}
	for i, s := range c.Client.Servers {
		if _, err := client.ParseServerAddr(s); err != nil {
			p = append(p, fmt.Sprintf("client.servers[%d]: %v", i, err))
		}
	}
	return p
}

// devIgnored returns one warning per setting that -dev overrides, so a
// config file that sets it for a cluster does not seem to take effect
// when it does not: the single dev server uses its own 200 ms Raft
// timeouts (it has no peers to wait for), whatever raft_multiplier says.
func (c *Config) devIgnored() []string {
	var w []string
	if c.DevMode && c.Server.RaftMultiplier > 1 {
		w = append(w, fmt.Sprintf("server.raft_multiplier = %d is ignored with -dev: the single dev server uses 200 ms Raft timeouts; the multiplier applies to servers started without -dev", c.Server.RaftMultiplier))
	}
	return w
}

// gossipKeyHelp says how to authenticate gossip; validateGossipAuth ends
// its messages with it.
const gossipKeyHelp = "gossip is neither encrypted nor backed by raft TLS, so anyone who reaches the gossip port could join and become a raft voter; " +
	"make a key with `gpulayer operator gossip keyring generate` and set server { encrypt = \"<key>\" } (or -encrypt=<key>) on every server, " +
	"or set tls { rpc = true }; on a trusted lab network only, server { allow_unauthenticated_gossip = true } opts out"

// validateGossipAuth refuses a served server that would join other
// servers (bootstrap_expect > 1 or retry_join) when its gossip is neither
// encrypted (server.encrypt) nor backed by Raft over TLS (tls.rpc), unless
// server.allow_unauthenticated_gossip opts out. -dev runs one server
// without gossip and is not checked.
func (c *Config) validateGossipAuth() []string {
	if !c.Server.Enabled || c.DevMode || c.Server.Encrypt != "" || c.Server.AllowUnauthenticatedGossip || (c.TLS != nil && c.TLS.RPC) {
		return nil
	}
	var p []string
	if c.Server.BootstrapExpect > 1 {
		p = append(p, fmt.Sprintf("server.bootstrap_expect: %d servers: %s", c.Server.BootstrapExpect, gossipKeyHelp))
	}
	if len(c.Server.RetryJoin) > 0 {
		p = append(p, "server.retry_join: "+gossipKeyHelp)
	}
	return p
}

// decodeGossipKey decodes a base64 gossip key of 16, 24 or 32 bytes.
func decodeGossipKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %v (make one with `gpulayer operator gossip keygen`)", err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	default:
		return nil, fmt.Errorf("key is %d bytes, want 16, 24 or 32 (make one with `gpulayer operator gossip keygen`)", len(key))
	}
}

// normalizeJoinAddr returns addr as "host:port", adding defaultPort when
// addr has no port. The error names what is wrong.
func normalizeJoinAddr(addr string, defaultPort int) (string, error) {
	a := strings.TrimSpace(addr)
	if a == "" {
		return "", fmt.Errorf("empty address")
	}
	if strings.Contains(a, "://") || strings.ContainsAny(a, "/ ") {
		return "", fmt.Errorf("%q: want host or host:port", addr)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		// No port: a bare host or IPv6 address.
		return net.JoinHostPort(strings.Trim(a, "[]"), strconv.Itoa(defaultPort)), nil
	}
	if host == "" {
		return "", fmt.Errorf("%q: no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: port %q is not a number in 1-65535", addr, port)
	}
	return a, nil
}

// GossipKey returns the decoded server.encrypt key, or nil when gossip is
// not encrypted. Validate has checked it.
func (c *Config) GossipKey() []byte {
	if c.Server.Encrypt == "" {
		return nil
	}
	key, _ := decodeGossipKey(c.Server.Encrypt)
	return key
}

// RetryJoinAddrs returns server.retry_join with the default gossip port
// (ports.serf) added where an address has none.
func (c *Config) RetryJoinAddrs() []string {
	out := make([]string, 0, len(c.Server.RetryJoin))
	for _, a := range c.Server.RetryJoin {
		if n, err := normalizeJoinAddr(a, c.Ports.Serf); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// SerfAddr returns "bind:port" for the servers' gossip (memberlist).
func (c *Config) SerfAddr() string {
	return net.JoinHostPort(c.BindAddr, strconv.Itoa(c.Ports.Serf))
}
