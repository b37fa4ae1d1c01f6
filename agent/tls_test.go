package agent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/agent/tlsutil/tlsutiltest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
)

// tlsAgentConfig returns a production-mode agent config on loopback with
// free ports and a tls block with a new certificate of role from pki.
func tlsAgentConfig(t *testing.T, pki *tlsutiltest.TestPKI, name string, role tlsutil.Role) *agent.Config {
	t.Helper()
	cf, kf, err := pki.Cert(name, tlsutil.CertOptions{Role: role})
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.Name = name
	cfg.DataDir = taskUserDir(t)
	cfg.BindAddr = "127.0.0.1"
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = freePort(t), freePort(t), freePort(t)
	cfg.TLS = &tlsutil.Config{HTTP: true, RPC: true, CAFile: pki.CAFile, CertFile: cf, KeyFile: kf}
	// These tests check certificates, not tokens: ACLs off
	// (TestTLSClusterEndToEnd runs both).
	off := false
	cfg.ACL = &agent.ACLConfig{Enabled: &off}
	return cfg
}

// httpsClient returns a client that trusts pki's CA and presents a new
// certificate of role (none when role is empty).
func httpsClient(t testing.TB, pki *tlsutiltest.TestPKI, role tlsutil.Role) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if role != "" {
		cf, kf, err := pki.Cert("caller-"+string(role), tlsutil.CertOptions{Role: role})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

func startTLSAgent(t *testing.T, cfg *agent.Config) *agent.Agent {
	t.Helper()
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
	if err != nil {
		t.Fatalf("start agent %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	return a
}

// TestExploitPlainHTTPRefused: with tls.http on, the API answers HTTPS
// callers with a certificate of the cluster's CA only; a plain HTTP
// request and a TLS caller without a certificate get no API answer.
func TestExploitPlainHTTPRefused(t *testing.T) {
	pki, err := tlsutiltest.WriteTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := tlsAgentConfig(t, pki, "s1", tlsutil.RoleServer)
	cfg.Server.Enabled = true
	a := startTLSAgent(t, cfg)
	addr := a.HTTPAddr()

	resp, err := http.Get("http://" + addr + "/v1/jobs")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || json.Valid(body) && strings.HasPrefix(strings.TrimSpace(string(body)), "[") {
			t.Fatalf("plain HTTP got an API answer: %d %s", resp.StatusCode, body)
		}
		if !strings.Contains(string(body), "HTTPS") {
			t.Fatalf("plain HTTP: %d %q, want Go's HTTPS refusal", resp.StatusCode, body)
		}
	}
	if _, err := httpsClient(t, pki, "").Get("https://" + addr + "/v1/jobs"); err == nil {
		t.Fatal("an HTTPS caller without a client certificate got an answer")
	}
	other, err := tlsutiltest.WriteTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	foreign := httpsClient(t, other, tlsutil.RoleCLI)
	foreign.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	if _, err := foreign.Get("https://" + addr + "/v1/jobs"); err == nil {
		t.Fatal("a caller with a certificate of another CA got an answer")
	}
	r2, err := httpsClient(t, pki, tlsutil.RoleCLI).Get("https://" + addr + "/v1/jobs")
	if err != nil {
		t.Fatalf("HTTPS with a cli certificate: %v", err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS with a cli certificate: %s", r2.Status)
	}
}

// TestTLSClientAgentRegistersOverHTTPS: a client-only agent with a client
// certificate registers its node with a TLS server, and one whose
// certificate is not of the cluster cannot.
func TestTLSClientAgentRegistersOverHTTPS(t *testing.T) {
	pki, err := tlsutiltest.WriteTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	scfg := tlsAgentConfig(t, pki, "s1", tlsutil.RoleServer)
	scfg.Server.Enabled = true
	srv := startTLSAgent(t, scfg)
	ccfg := tlsAgentConfig(t, pki, "c1", tlsutil.RoleClient)
	ccfg.Client.Enabled = true
	ccfg.Client.Servers = []string{srv.HTTPAddr()}
	startTLSAgent(t, ccfg)
	hc := httpsClient(t, pki, tlsutil.RoleCLI)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := hc.Get("https://" + srv.HTTPAddr() + "/v1/nodes")
		if err == nil {
			var nodes []struct{ Name string }
			_ = json.NewDecoder(resp.Body).Decode(&nodes)
			resp.Body.Close()
			if len(nodes) == 1 && nodes[0].Name == "c1" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("client c1 did not register over HTTPS: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A "server" whose certificate is a client's is not trusted as one:
	// the client's connection refuses it before sending anything.
	fake := tlsAgentConfig(t, pki, "c2", tlsutil.RoleClient)
	fake.Server.Enabled = true
	fakeSrv := startTLSAgent(t, fake)
	cb, err := pki.Bundle("c3", tlsutil.Config{HTTP: true}, tlsutil.CertOptions{Role: tlsutil.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.NewHTTPServerConn(client.HTTPServerConnConfig{Servers: []string{fakeSrv.HTTPAddr()}, TLS: cb.ServerHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = conn.NodeRegister(ctx, &structs.Node{ID: structs.GenerateUUID(), SecretID: structs.GenerateUUID(), Name: "c3", Datacenter: "dc1"})
	if err == nil || !strings.Contains(err.Error(), "server.global.gpulayer") {
		t.Fatalf("registering with a server that has a client certificate: %v, want a certificate name error", err)
	}
}
