// Package tlsutil builds the crypto/tls configurations of a GPUlayer agent
// from its `tls` block and holds the hostname rules of the cluster's PKI:
// only a certificate for "server.<region>.gpulayer" may act as a server
// (Raft, forwarding to the leader), clients present
// "client.<region>.gpulayer" and the CLI "cli.<region>.gpulayer". It also
// makes a test PKI (pki.go) for `gpulayer tls ca create` and `gpulayer tls
// cert create`.
//
// The other packages never import this one: they take the *tls.Config
// values it returns, whose VerifyConnection callbacks enforce the hostname
// rules, so the rules live in one place.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// DefaultRegion is the region of an agent whose config names none.
const DefaultRegion = "global"

// Domain is the name suffix of every certificate role name.
const Domain = "gpulayer"

// ErrConfig is wrapped by every error about the tls block or its files.
var ErrConfig = errors.New("tls config")

// ErrPeerRole is wrapped by the error of a handshake whose peer certificate
// is not for the role the connection needs (a client certificate on Raft).
var ErrPeerRole = errors.New("peer certificate is not for the required role")

// Role is what a certificate may act as.
type Role string

// The roles of the cluster's PKI.
const (
	RoleServer Role = "server"
	RoleClient Role = "client"
	RoleCLI    Role = "cli"
)

// Name returns the certificate name of role in region:
// "server.global.gpulayer". An empty region means DefaultRegion.
func (r Role) Name(region string) string {
	if region == "" {
		region = DefaultRegion
	}
	return string(r) + "." + region + "." + Domain
}

// Config is the agent's `tls` block, in Nomad's shape:
//
//	tls {
//	  http = true
//	  rpc  = true
//	  ca_file   = "gpulayer-agent-ca.pem"
//	  cert_file = "global-server-gpulayer.pem"
//	  key_file  = "global-server-gpulayer-key.pem"
//	  verify_server_hostname = true
//	  verify_https_client    = true
//	}
type Config struct {
	// HTTP serves the HTTP API over HTTPS only, and makes the agent's own
	// HTTP calls (client to server, forwarding, proxying to nodes) HTTPS.
	HTTP bool `hcl:"http,optional"`
	// RPC runs Raft over mutual TLS: only peers with a certificate for
	// "server.<region>.gpulayer" are accepted or dialed.
	RPC bool `hcl:"rpc,optional"`
	// CAFile is the PEM file of the CA certificate(s) every peer's
	// certificate must chain to. Required when HTTP or RPC is on.
	CAFile string `hcl:"ca_file,optional"`
	// CertFile and KeyFile are this agent's PEM certificate and key.
	// Required when HTTP or RPC is on.
	CertFile string `hcl:"cert_file,optional"`
	KeyFile  string `hcl:"key_file,optional"`
	// VerifyServerHostname makes a client agent check that the server it
	// talks to has a certificate for "server.<region>.gpulayer". Nil means
	// true (Nomad's default is false; GPUlayer's is safer). Raft and
	// server-to-server forwarding check the server name always.
	VerifyServerHostname *bool `hcl:"verify_server_hostname,optional"`
	// VerifyHTTPSClient makes the HTTPS API require a client certificate
	// signed by the CA. Nil means true when HTTP is on (mTLS); set it false
	// to let browsers reach the UI without a certificate (ACL tokens still
	// apply).
	VerifyHTTPSClient *bool `hcl:"verify_https_client,optional"`
}

// Enabled reports whether either listener uses TLS.
func (c *Config) Enabled() bool { return c != nil && (c.HTTP || c.RPC) }

// verifyServerHostname returns the effective VerifyServerHostname.
func (c *Config) verifyServerHostname() bool {
	return c.VerifyServerHostname == nil || *c.VerifyServerHostname
}

// verifyHTTPSClient returns the effective VerifyHTTPSClient.
func (c *Config) verifyHTTPSClient() bool {
	return c.VerifyHTTPSClient == nil || *c.VerifyHTTPSClient
}

// Validate checks the block without reading files and returns one message
// per problem, each naming the field ("tls.ca_file: required when ...").
func (c *Config) Validate() []string {
	if !c.Enabled() {
		return nil
	}
	var p []string
	for _, f := range []struct{ name, v string }{{"ca_file", c.CAFile}, {"cert_file", c.CertFile}, {"key_file", c.KeyFile}} {
		if strings.TrimSpace(f.v) == "" {
			p = append(p, fmt.Sprintf("tls.%s: required when tls.http or tls.rpc is true", f.name))
		}
	}
	return p
}

// Bundle is a loaded tls block: the CA pool and this agent's certificate,
// and the region whose role names peers must present. Its methods return
// fresh *tls.Config values, safe to modify.
type Bundle struct {
	cfg    Config
	region string
	pool   *x509.CertPool
	cert   tls.Certificate
	// roles are the role names this agent's own certificate is valid for.
	roles []Role
}

// Load reads the CA, certificate and key files of cfg. The certificate
// must chain to the CA. It returns an error wrapping ErrConfig that names
// the field and file. region empty means DefaultRegion.
func Load(cfg Config, region string) (*Bundle, error) {
	if p := cfg.Validate(); len(p) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(p, "; "))
	}
	if region == "" {
		region = DefaultRegion
	}
	caPEM, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.ca_file: %v", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: tls.ca_file %s: no PEM certificate found", ErrConfig, cfg.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.cert_file %s / tls.key_file %s: %v", ErrConfig, cfg.CertFile, cfg.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: tls.cert_file %s: %v", ErrConfig, cfg.CertFile, err)
		}
		cert.Leaf = leaf
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%w: tls.cert_file %s is not signed by tls.ca_file %s: %v", ErrConfig, cfg.CertFile, cfg.CAFile, err)
	}
	b := &Bundle{cfg: cfg, region: region, pool: pool, cert: cert}
	for _, r := range []Role{RoleServer, RoleClient, RoleCLI} {
		if leaf.VerifyHostname(r.Name(region)) == nil {
			b.roles = append(b.roles, r)
		}
	}
	return b, nil
}

// Region returns the region whose role names the bundle checks.
func (b *Bundle) Region() string { return b.region }

// Config returns the tls block the bundle was loaded from.
func (b *Bundle) Config() Config { return b.cfg }

// HasRole reports whether this agent's own certificate is valid for role
// in the bundle's region.
func (b *Bundle) HasRole(r Role) bool {
	for _, have := range b.roles {
		if have == r {
			return true
		}
	}
	return false
}

// base is the configuration every connection shares: TLS 1.2 or newer
// (1.3 preferred by crypto/tls), Go's default modern cipher suites and
// curves, this agent's certificate.
func (b *Bundle) base() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{b.cert},
	}
}

// RaftServer is the configuration of the Raft listener: it requires a
// client certificate that chains to the CA and is for
// "server.<region>.gpulayer"; any other peer fails the handshake with an
// error wrapping ErrPeerRole.
func (b *Bundle) RaftServer() *tls.Config {
	c := b.base()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = b.pool
	c.VerifyConnection = b.requireRole(RoleServer)
	return c
}

// RaftClient is the configuration of an outgoing Raft connection: it
// presents this agent's certificate and accepts only a peer certificate
// for "server.<region>.gpulayer", whatever address was dialed.
func (b *Bundle) RaftClient() *tls.Config {
	c := b.base()
	c.RootCAs = b.pool
	c.ServerName = RoleServer.Name(b.region)
	return c
}

// HTTPServer is the configuration of the HTTPS API listener: with
// verify_https_client (the default) it requires a client certificate that
// chains to the CA, of any role.
func (b *Bundle) HTTPServer() *tls.Config {
	c := b.base()
	c.NextProtos = []string{"http/1.1"} // exec and log streams are HTTP/1.1 full duplex
	if b.cfg.verifyHTTPSClient() {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = b.pool
	} else {
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = b.pool
	}
	return c
}

// ServerHTTPClient is the configuration of this agent's HTTPS calls to a
// server (a client agent's node routes, a follower forwarding to the
// leader): it presents this agent's certificate and requires the peer to
// be "server.<region>.gpulayer". With verify_server_hostname = false a
// client agent (whose certificate is not a server's) accepts any server
// certificate that chains to the CA; a server agent checks the name
// always, since forwarding hands the leader a user's request.
func (b *Bundle) ServerHTTPClient() *tls.Config {
	c := b.base()
	c.RootCAs = b.pool
	if b.cfg.verifyServerHostname() || b.HasRole(RoleServer) {
		c.ServerName = RoleServer.Name(b.region)
		return c
	}
	c.InsecureSkipVerify = true // the chain is verified below, the name is not
	c.VerifyConnection = b.verifyChainOnly
	return c
}

// NodeHTTPClient is the configuration of a server's HTTPS calls to a
// client node's agent (log, exec, signal and telemetry proxying): it
// presents this agent's certificate and requires the peer to have a
// certificate for "client.<region>.gpulayer" (or a server's, for a node
// that runs in a server agent), so an address registered by someone
// without a client certificate cannot be reached as a node.
func (b *Bundle) NodeHTTPClient() *tls.Config {
	c := b.base()
	c.RootCAs = b.pool
	// The dialed address is the node's, not a role name: verify the chain
	// and the role in VerifyConnection.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := b.verifyChainOnly(cs); err != nil {
			return err
		}
		return VerifyPeerRole(cs, b.region, RoleClient, RoleServer)
	}
	return c
}

// requireRole returns a VerifyConnection callback that accepts only a peer
// certificate for one of roles (the chain is verified by crypto/tls).
func (b *Bundle) requireRole(roles ...Role) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		return VerifyPeerRole(cs, b.region, roles...)
	}
}

// verifyChainOnly verifies the peer's chain against the CA, for client
// configurations that skip Go's hostname check.
func (b *Bundle) verifyChainOnly(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the peer sent no certificate", ErrPeerRole)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: b.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("peer certificate: %w", err)
	}
	return nil
}

// VerifyPeerRole checks that the peer's leaf certificate in cs is valid for
// the name of one of roles in region ("server.global.gpulayer"). It does
// not verify the chain: use it after crypto/tls has. It returns an error
// wrapping ErrPeerRole that names the certificate's names and the roles
// wanted.
func VerifyPeerRole(cs tls.ConnectionState, region string, roles ...Role) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the peer sent no certificate", ErrPeerRole)
	}
	leaf := cs.PeerCertificates[0]
	want := make([]string, 0, len(roles))
	for _, r := range roles {
		name := r.Name(region)
		if leaf.VerifyHostname(name) == nil {
			return nil
		}
		want = append(want, name)
	}
	return fmt.Errorf("%w: certificate for %v (CN %q) is not valid for %s", ErrPeerRole, leaf.DNSNames, leaf.Subject.CommonName, strings.Join(want, " or "))
}
