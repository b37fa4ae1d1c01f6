package http

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestExploitArtifactServerPeerIdentity: only a request over TLS whose
// verified client certificate names a server, and that a follower did not
// forward on a user's behalf, counts as another server's blob sync (which
// may read any artifact). A forwarded request (it too arrives with a
// server's certificate), a client certificate and plain HTTP do not.
func TestExploitArtifactServerPeerIdentity(t *testing.T) {
	h := &handler{serverPeerName: "server.global.gpulayer"}
	state := func(names ...string) *tls.ConnectionState {
		return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{DNSNames: names}}}}
	}
	cases := []struct {
		name      string
		tls       *tls.ConnectionState
		forwarded bool
		want      bool
	}{
		{"server certificate", state("server.global.gpulayer"), false, true},
		{"forwarded by a follower", state("server.global.gpulayer"), true, false},
		{"client certificate", state("client.global.gpulayer"), false, false},
		{"server of another region", state("server.eu.gpulayer"), false, false},
		{"plain HTTP", nil, false, false},
		{"unverified", &tls.ConnectionState{}, false, false},
	}
	for _, tc := range cases {
		r := httptest.NewRequest("GET", "/v1/artifact/sha256/x", nil)
		r.TLS = tc.tls
		if tc.forwarded {
			r.Header.Set(HeaderForwarded, "1")
		}
		if got := h.isServerPeer(r); got != tc.want {
			t.Errorf("%s: isServerPeer = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (&handler{}).isServerPeer(func() *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.TLS = state("server.global.gpulayer")
		return r
	}()) {
		t.Error("without tls.http (no ServerPeerName) a certificate counted as a server")
	}
}
