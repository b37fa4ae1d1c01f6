package http

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/agent/tlsutil/tlsutiltest"
)

// TestNodeProxyRequiresAClientCertificate: with TLS on, the server reaches
// a node's agent only over HTTPS and only when it presents a client (or
// server) certificate of the cluster's CA, whatever address and scheme the
// node registered.
func TestNodeProxyRequiresAClientCertificate(t *testing.T) {
	pki, err := tlsutiltest.WriteTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bundle := func(name string, role tlsutil.Role) *tlsutil.Bundle {
		b, err := pki.Bundle(name, tlsutil.Config{HTTP: true}, tlsutil.CertOptions{Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	srv := bundle("s1", tlsutil.RoleServer)
	p := newPeers(srv.NodeHTTPClient())
	if u, err := p.nodeURL("http://10.0.0.9:4656/x?y=1"); err != nil || u.String() != "https://10.0.0.9:4656" {
		t.Fatalf("nodeURL = %v, %v; want https://10.0.0.9:4656", u, err)
	}
	if _, err := p.nodeURL("ftp://10.0.0.9"); err == nil {
		t.Fatal("nodeURL accepted an ftp address")
	}
	serve := func(cfg *tls.Config) string {
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("secret logs")) }))
		ts.TLS = cfg
		ts.StartTLS()
		t.Cleanup(ts.Close)
		return strings.TrimPrefix(ts.URL, "https://")
	}
	get := func(addr string) error {
		u, err := p.nodeURL(addr)
		if err != nil {
			return err
		}
		resp, err := p.node.Get(u.String() + "/v1/client/stats")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(serve(bundle("c1", tlsutil.RoleClient).HTTPServer())); err != nil {
		t.Fatalf("a node with a client certificate: %v", err)
	}
	if err := get(serve(bundle("cli", tlsutil.RoleCLI).HTTPServer())); err == nil {
		t.Fatal("a node address serving a cli certificate was reached as a node")
	}
	other, err := tlsutiltest.WriteTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ob, err := other.Bundle("c9", tlsutil.Config{HTTP: true}, tlsutil.CertOptions{Role: tlsutil.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	if err := get(serve(ob.HTTPServer())); err == nil {
		t.Fatal("a node address serving a client certificate of another CA was reached as a node")
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("x")) }))
	defer plain.Close()
	if err := get(plain.URL); err == nil {
		t.Fatal("a plain HTTP node address was reached with TLS on")
	}
}
