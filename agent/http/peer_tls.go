package http

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// peers are the HTTP clients the handler reaches other agents with: the
// leader (forwarding) and client nodes (log, exec, signal, restart and
// telemetry proxying). With the agent's tls.http on they speak HTTPS and
// verify the peer's role: the leader must present a certificate for
// "server.<region>.gpulayer" and a node one for "client.<region>.gpulayer"
// (Config.ServerTLS and Config.NodeTLS, made by agent/tlsutil).
type peers struct {
	scheme string
	// node reads logs and telemetry from node agents.
	node *http.Client
	// nodeAction carries each proxied allocation action on a fresh
	// connection: a pooled connection the node agent closed after an exec
	// stream would fail the next POST, which net/http does not retry,
	// with a 502.
	nodeAction http.RoundTripper
}

// newPeers builds the node clients; nodeTLS nil means plain HTTP.
func newPeers(nodeTLS *tls.Config) *peers {
	p := &peers{scheme: "http"}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if nodeTLS != nil {
		p.scheme = "https"
		t.TLSClientConfig = nodeTLS.Clone()
	}
	p.node = &http.Client{Transport: t}
	a := t.Clone()
	a.DisableKeepAlives = true
	p.nodeAction = a
	return p
}

// nodeURL returns the base URL of a node's agent at addr ("host:port" or
// an http(s) URL, as the node registered it), with the scheme the agent's
// TLS setting demands: with TLS on, a node is never reached over plain
// HTTP, whatever it registered.
func (p *peers) nodeURL(addr string) (*url.URL, error) {
	raw := addr
	if !strings.Contains(raw, "://") {
		raw = p.scheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host")
	}
	if p.scheme == "https" {
		u.Scheme = "https"
	}
	u.Path, u.RawQuery, u.User = "", "", nil
	return u, nil
}
