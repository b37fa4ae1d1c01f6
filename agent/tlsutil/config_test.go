package tlsutil_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/agent/tlsutil/tlsutiltest"
)

// handshake runs a TLS handshake between a server with srv and a client
// with cli over an in-memory pipe and returns the client's and the
// server's errors.
func handshake(t *testing.T, srv, cli *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, srv)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3 sends the server's verdict on the client
			// certificate after the client's handshake returns: make
			// the client read it.
			_, err = s.Write([]byte("x"))
		}
		if err != nil {
			_ = a.Close()
		}
		done <- err
	}()
	c := tls.Client(b, cli)
	clientErr = c.Handshake()
	if clientErr == nil {
		buf := make([]byte, 1)
		_, clientErr = c.Read(buf)
	}
	_ = b.Close()
	return clientErr, <-done
}

func newPKI(t *testing.T) *tlsutiltest.TestPKI {
	t.Helper()
	p, err := tlsutiltest.WriteTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bundle loads, for an agent of the default region, a new certificate of
// role for certRegion.
func bundle(t *testing.T, p *tlsutiltest.TestPKI, name string, role tlsutil.Role, certRegion string) *tlsutil.Bundle {
	t.Helper()
	cf, kf, err := p.Cert(name, tlsutil.CertOptions{Role: role, Region: certRegion})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tlsutil.Load(tlsutil.Config{RPC: true, HTTP: true, CAFile: p.CAFile, CertFile: cf, KeyFile: kf}, "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// caPool reads p's CA.
func caPool(t *testing.T, p *tlsutiltest.TestPKI) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

func TestRaftHostnameRules(t *testing.T) {
	p := newPKI(t)
	srv := bundle(t, p, "s1", tlsutil.RoleServer, "")
	other := newPKI(t)
	cases := []struct {
		name string
		peer *tlsutil.Bundle
		ok   bool
	}{
		{"server certificate", bundle(t, p, "s2", tlsutil.RoleServer, ""), true},
		{"client certificate", bundle(t, p, "c1", tlsutil.RoleClient, ""), false},
		{"cli certificate", bundle(t, p, "cli", tlsutil.RoleCLI, ""), false},
		{"server certificate of another region", bundle(t, p, "s3", tlsutil.RoleServer, "west"), false},
		{"server certificate of another CA", bundle(t, other, "s4", tlsutil.RoleServer, ""), false},
	}
	for _, tc := range cases {
		t.Run("dialing in with a "+tc.name, func(t *testing.T) {
			// The peer dials this server's Raft listener.
			cerr, serr := handshake(t, srv.RaftServer(), tc.peer.RaftClient())
			if tc.ok && (cerr != nil || serr != nil) {
				t.Fatalf("handshake failed: client %v, server %v", cerr, serr)
			}
			if !tc.ok && serr == nil {
				t.Fatalf("the Raft listener accepted a %s", tc.name)
			}
		})
		t.Run("answering with a "+tc.name, func(t *testing.T) {
			// This server dials the peer's Raft listener.
			cerr, _ := handshake(t, tc.peer.RaftServer(), srv.RaftClient())
			if tc.ok && cerr != nil {
				t.Fatalf("handshake failed: %v", cerr)
			}
			if !tc.ok && cerr == nil {
				t.Fatalf("a Raft dial accepted a %s as a server", tc.name)
			}
		})
	}
}

func TestRaftRefusesNoCertificate(t *testing.T) {
	p := newPKI(t)
	srv := bundle(t, p, "s1", tlsutil.RoleServer, "")
	cli := &tls.Config{RootCAs: caPool(t, p), ServerName: tlsutil.RoleServer.Name("")}
	_, serr := handshake(t, srv.RaftServer(), cli)
	if serr == nil {
		t.Fatal("the Raft listener accepted a peer without a certificate")
	}
}

func TestHTTPHostnameRules(t *testing.T) {
	p := newPKI(t)
	server := bundle(t, p, "s1", tlsutil.RoleServer, "")
	client := bundle(t, p, "c1", tlsutil.RoleClient, "")
	cliB := bundle(t, p, "cli", tlsutil.RoleCLI, "")
	t.Run("client agent reaches a server", func(t *testing.T) {
		if cerr, serr := handshake(t, server.HTTPServer(), client.ServerHTTPClient()); cerr != nil || serr != nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
	})
	t.Run("a client certificate cannot pose as a server", func(t *testing.T) {
		other := bundle(t, p, "c2", tlsutil.RoleClient, "")
		cerr, _ := handshake(t, other.HTTPServer(), client.ServerHTTPClient())
		if !errors.Is(cerr, tlsutil.ErrPeerRole) && (cerr == nil || !strings.Contains(cerr.Error(), "server.global.gpulayer")) {
			t.Fatalf("want a hostname error, got %v", cerr)
		}
	})
	t.Run("server reaches a client node", func(t *testing.T) {
		if cerr, serr := handshake(t, client.HTTPServer(), server.NodeHTTPClient()); cerr != nil || serr != nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
	})
	t.Run("a cli certificate cannot pose as a node", func(t *testing.T) {
		// A CLI certificate has no server auth usage and no client
		// name: either refuses it.
		cfg := cliB.HTTPServer()
		cerr, _ := handshake(t, cfg, server.NodeHTTPClient())
		if cerr == nil {
			t.Fatal("a node proxy accepted a cli certificate")
		}
	})
	t.Run("verify_https_client requires a certificate", func(t *testing.T) {
		bare := &tls.Config{RootCAs: caPool(t, p), ServerName: "localhost"}
		if _, serr := handshake(t, server.HTTPServer(), bare); serr == nil {
			t.Fatal("the HTTPS API accepted a caller without a certificate")
		}
	})
	t.Run("verify_https_client off lets a caller without a certificate in", func(t *testing.T) {
		off := false
		b, err := p.Bundle("s9", tlsutil.Config{HTTP: true, VerifyHTTPSClient: &off}, tlsutil.CertOptions{Role: tlsutil.RoleServer})
		if err != nil {
			t.Fatal(err)
		}
		bare := &tls.Config{RootCAs: caPool(t, p), ServerName: "localhost"}
		if cerr, serr := handshake(t, b.HTTPServer(), bare); cerr != nil || serr != nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
	})
}

func TestLoadErrorsNameTheField(t *testing.T) {
	p := newPKI(t)
	cf, kf, err := p.Cert("s1", tlsutil.CertOptions{Role: tlsutil.RoleServer})
	if err != nil {
		t.Fatal(err)
	}
	other := newPKI(t)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  tlsutil.Config
		want string
	}{
		{"no files", tlsutil.Config{RPC: true}, "tls.ca_file: required"},
		{"missing ca", tlsutil.Config{RPC: true, CAFile: "/nonexistent", CertFile: cf, KeyFile: kf}, "tls.ca_file"},
		{"ca not pem", tlsutil.Config{RPC: true, CAFile: bad, CertFile: cf, KeyFile: kf}, "no PEM certificate"},
		{"key mismatch", tlsutil.Config{RPC: true, CAFile: p.CAFile, CertFile: cf, KeyFile: p.CAKeyFile}, "tls.cert_file"},
		{"other CA", tlsutil.Config{RPC: true, CAFile: other.CAFile, CertFile: cf, KeyFile: kf}, "is not signed by tls.ca_file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsutil.Load(tc.cfg, "")
			if !errors.Is(err, tlsutil.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want tlsutil.ErrConfig naming %q, got %v", tc.want, err)
			}
		})
	}
}

func TestGenerateCertSANsAndFileNames(t *testing.T) {
	p := newPKI(t)
	b := bundle(t, p, "s1", tlsutil.RoleServer, "")
	cf, _, err := p.Cert("s1b", tlsutil.CertOptions{Role: tlsutil.RoleServer})
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(cf)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(pemBytes, mustRead(t, strings.TrimSuffix(cf, ".pem")+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"server.global.gpulayer", "localhost", "127.0.0.1"} {
		if err := leaf.VerifyHostname(n); err != nil {
			t.Errorf("server certificate not valid for %s: %v", n, err)
		}
	}
	if !b.HasRole(tlsutil.RoleServer) || b.HasRole(tlsutil.RoleClient) {
		t.Error("a server certificate's roles are not server only")
	}
	if c, k := tlsutil.CertFileNames(tlsutil.RoleServer, ""); c != "global-server-gpulayer.pem" || k != "global-server-gpulayer-key.pem" {
		t.Errorf("file names %s %s", c, k)
	}
	if _, err := tlsutil.GenerateCert(p.CA, tlsutil.CertOptions{Role: "admin"}); err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("unknown role: %v", err)
	}
	if _, err := tlsutil.GenerateCert(p.CA, tlsutil.CertOptions{Role: tlsutil.RoleServer, Days: tlsutil.MaxDays + 1}); err == nil || !strings.Contains(err.Error(), "days") {
		t.Errorf("days out of range: %v", err)
	}
	if _, err := tlsutil.GenerateCert(p.CA, tlsutil.CertOptions{Role: tlsutil.RoleServer, Region: "Bad Region"}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("bad region: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
