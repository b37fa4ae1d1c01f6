package command

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// makePKI runs `tls ca create` and `tls cert create` for each role in a
// temporary directory and returns it.
func makePKI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	if r := runCmd(t, "http://127.0.0.1:1", "tls", "ca", "create"); r.code != 0 {
		t.Fatalf("tls ca create: %d %s", r.code, r.err)
	}
	for _, role := range []string{"-server", "-client", "-cli"} {
		if r := runCmd(t, "http://127.0.0.1:1", "tls", "cert", "create", role, "-additional-dnsname=api.example", "-additional-ipaddress=10.0.0.1"); r.code != 0 {
			t.Fatalf("tls cert create %s: %d %s", role, r.code, r.err)
		}
	}
	return dir
}

func TestTLSCreateWritesNomadShapedFiles(t *testing.T) {
	dir := makePKI(t)
	for _, f := range []string{"gpulayer-agent-ca.pem", "gpulayer-agent-ca-key.pem",
		"global-server-gpulayer.pem", "global-server-gpulayer-key.pem",
		"global-client-gpulayer.pem", "global-client-gpulayer-key.pem",
		"global-cli-gpulayer.pem", "global-cli-gpulayer-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.HasSuffix(f, "-key.pem") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "global-server-gpulayer.pem"), filepath.Join(dir, "global-server-gpulayer-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"server.global.gpulayer", "localhost", "127.0.0.1", "api.example", "10.0.0.1"} {
		if err := leaf.VerifyHostname(n); err != nil {
			t.Errorf("server certificate: %v", err)
		}
	}
	// A second run refuses to overwrite.
	if r := runCmd(t, "http://127.0.0.1:1", "tls", "ca", "create"); r.code == 0 || !strings.Contains(r.err, "already exists") {
		t.Errorf("second ca create: %d %q", r.code, r.err)
	}
	if r := runCmd(t, "http://127.0.0.1:1", "tls", "cert", "create"); r.code == 0 || !strings.Contains(r.err, "Exactly one of") {
		t.Errorf("cert create without a role: %d %q", r.code, r.err)
	}
	if r := runCmd(t, "http://127.0.0.1:1", "tls", "cert", "create", "-client", "-region=west", "-additional-ipaddress=nope"); r.code == 0 || !strings.Contains(r.err, "additional-ipaddress") {
		t.Errorf("bad ip: %d %q", r.code, r.err)
	}
}

func TestTLSFlagsReachAnAgentThatRequiresClientCerts(t *testing.T) {
	dir := makePKI(t)
	server, err := tls.LoadX509KeyPair(filepath.Join(dir, "global-server-gpulayer.pem"), filepath.Join(dir, "global-server-gpulayer-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "gpulayer-agent-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[]"))
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	ts.StartTLS()
	t.Cleanup(ts.Close)

	ca := "-ca-cert=" + filepath.Join(dir, "gpulayer-agent-ca.pem")
	cc := "-client-cert=" + filepath.Join(dir, "global-cli-gpulayer.pem")
	ck := "-client-key=" + filepath.Join(dir, "global-cli-gpulayer-key.pem")
	if r := runCmd(t, ts.URL, "job", "status", ca, cc, ck); r.code != 0 {
		t.Fatalf("job status with the TLS flags: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "job", "status", ca); r.code == 0 {
		t.Fatal("job status without a client certificate succeeded")
	}
	if r := runCmd(t, ts.URL, "job", "status"); r.code == 0 {
		t.Fatal("job status without the CA succeeded against a private CA")
	}
	// The same through the environment, Nomad's names included.
	t.Setenv("NOMAD_CACERT", filepath.Join(dir, "gpulayer-agent-ca.pem"))
	t.Setenv("GPULAYER_CLIENT_CERT", filepath.Join(dir, "global-cli-gpulayer.pem"))
	t.Setenv("GPULAYER_CLIENT_KEY", filepath.Join(dir, "global-cli-gpulayer-key.pem"))
	t.Setenv("GPULAYER_TLS_SERVER_NAME", "server.global.gpulayer")
	if r := runCmd(t, ts.URL, "job", "status"); r.code != 0 {
		t.Fatalf("job status with the TLS variables: %d %s", r.code, r.err)
	}
	t.Setenv("GPULAYER_TLS_SERVER_NAME", "client.global.gpulayer")
	if r := runCmd(t, ts.URL, "job", "status"); r.code == 0 {
		t.Fatal("a server name the certificate lacks was accepted")
	}
}

func TestGossipKeyringGenerate(t *testing.T) {
	r := runCmd(t, "http://127.0.0.1:1", "operator", "gossip", "keyring", "generate")
	if r.code != 0 || len(strings.TrimSpace(r.out)) != 44 {
		t.Fatalf("keyring generate: %d %q %q", r.code, r.out, r.err)
	}
}
