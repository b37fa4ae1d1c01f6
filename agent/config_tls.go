package agent

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/server"
)

// mergeTLS overlays the set fields of o's tls block onto c's.
func (c *Config) mergeTLS(o *tlsutil.Config) {
	if o == nil {
		return
	}
	if c.TLS == nil {
		c.TLS = &tlsutil.Config{}
	}
	t := c.TLS
	t.HTTP = t.HTTP || o.HTTP
	t.RPC = t.RPC || o.RPC
	for _, f := range []struct {
		dst *string
		src string
	}{{&t.CAFile, o.CAFile}, {&t.CertFile, o.CertFile}, {&t.KeyFile, o.KeyFile}} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if o.VerifyServerHostname != nil {
		v := *o.VerifyServerHostname
		t.VerifyServerHostname = &v
	}
	if o.VerifyHTTPSClient != nil {
		v := *o.VerifyHTTPSClient
		t.VerifyHTTPSClient = &v
	}
}

// validateTLS checks the tls block and region, one message per problem.
func (c *Config) validateTLS() []string {
	var p []string
	if c.Region != "" {
		// The region is part of certificate names: a DNS label.
		if err := tlsutil.CheckRegion(c.Region); err != nil {
			p = append(p, err.Error())
		}
	}
	if !c.TLS.Enabled() {
		return p
	}
	p = append(p, c.TLS.Validate()...)
	return p
}

// region returns the configured region or tlsutil.DefaultRegion.
func (c *Config) region() string {
	if c.Region == "" {
		return tlsutil.DefaultRegion
	}
	return c.Region
}

// loadTLS reads the tls block's files, or returns nil when TLS is off.
// Errors wrap ErrConfig.
func (c *Config) loadTLS() (*tlsutil.Bundle, error) {
	if !c.TLS.Enabled() {
		return nil, nil
	}
	b, err := tlsutil.Load(*c.TLS, c.region())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return b, nil
}

// wrapTLS returns ln serving TLS only when tls.http is on (a plain HTTP
// request gets Go's 400 "client sent an HTTP request to an HTTPS server"
// and no API answer), else ln. It warns about what is not protected: a
// server without a gossip key, TLS with rpc or http off, a server
// certificate that is not a server's, either verify option off.
func (a *Agent) wrapTLS(ln net.Listener, tb *tlsutil.Bundle) net.Listener {
	cfg := a.config
	if cfg.Server.Enabled && !cfg.DevMode && cfg.Server.Encrypt == "" {
		if cfg.Server.AllowUnauthenticatedGossip && (tb == nil || !tb.Config().RPC) {
			a.logger.Warn("server.allow_unauthenticated_gossip = true: anyone who reaches the gossip port can join and become a raft voter " +
				"with every secret in the raft log; trusted lab networks only; set server { encrypt = \"...\" } (gpulayer operator gossip keyring generate)")
		} else {
			a.logger.Warn("gossip is not encrypted: anyone who reaches the gossip port can join as a member (without tls.rpc this server " +
				"therefore joins no other server and adds no gossip member to raft); " +
				"set server { encrypt = \"...\" } (gpulayer operator gossip keyring generate) and tls { rpc = true } (see website/docs/tls.md)")
		}
	}
	if tb == nil {
		return ln
	}
	t := tb.Config()
	if cfg.Server.Enabled && !tb.HasRole(tlsutil.RoleServer) {
		a.logger.Warn("this server's certificate is not for "+tlsutil.RoleServer.Name(tb.Region())+": other servers will refuse it on raft and forwarding",
			"cert_file", t.CertFile)
	}
	if cfg.Server.Enabled && !t.RPC {
		a.logger.Warn("tls.rpc is off: raft is not authenticated")
	}
	if !t.HTTP {
		a.logger.Warn("tls.http is off: the HTTP API is plain HTTP")
		return ln
	}
	if t.VerifyServerHostname != nil && !*t.VerifyServerHostname {
		a.logger.Warn("tls.verify_server_hostname = false: this client accepts any certificate of the CA as a server")
	}
	if t.VerifyHTTPSClient != nil && !*t.VerifyHTTPSClient {
		a.logger.Warn("tls.verify_https_client = false: the HTTPS API accepts callers without a client certificate")
	}
	return tls.NewListener(ln, tb.HTTPServer())
}

// raftTLS returns the server's Raft TLS settings, or nil when tls.rpc is
// off.
func (a *Agent) raftTLS(tb *tlsutil.Bundle) *server.RaftTLS {
	if tb == nil || !tb.Config().RPC {
		return nil
	}
	return &server.RaftTLS{Server: tb.RaftServer(), Client: tb.RaftClient()}
}

// serverHTTPTLS is the configuration this agent reaches servers' HTTP API
// with (client to server, follower to leader), or nil without tls.http.
func serverHTTPTLS(tb *tlsutil.Bundle) *tls.Config {
	if tb == nil || !tb.Config().HTTP {
		return nil
	}
	return tb.ServerHTTPClient()
}

// nodeHTTPTLS is the configuration a server reaches client nodes' agents
// with, or nil without tls.http.
func nodeHTTPTLS(tb *tlsutil.Bundle) *tls.Config {
	if tb == nil || !tb.Config().HTTP {
		return nil
	}
	return tb.NodeHTTPClient()
}

// serverPeerName is the certificate name another server presents over
// tls.http ("server.<region>.gpulayer"), or "" without tls.http.
func serverPeerName(tb *tlsutil.Bundle) string {
	if tb == nil || !tb.Config().HTTP {
		return ""
	}
	return tlsutil.RoleServer.Name(tb.Region())
}
