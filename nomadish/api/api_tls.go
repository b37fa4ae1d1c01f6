package api

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// TLSConfig is the client's HTTPS configuration, shaped like Nomad's
// api.TLSConfig. File paths are PEM files.
type TLSConfig struct {
	// CACert is the CA certificate that verifies the agent's certificate;
	// empty means the system's roots.
	CACert string
	// ClientCert and ClientKey are the certificate and key presented to an
	// agent that requires one; both or neither.
	ClientCert string
	ClientKey  string
	// TLSServerName is the name the agent's certificate is verified
	// against; empty means the address's host.
	TLSServerName string
	// Insecure skips verifying the agent's certificate.
	Insecure bool
}

// transport returns an HTTP transport for c. The error names the file or
// field that is wrong.
func (c *TLSConfig) transport() (*http.Transport, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.TLSServerName,
		InsecureSkipVerify: c.Insecure, //nolint:gosec // the user asked with -tls-skip-verify
	}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("tls: CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA certificate %s: no PEM certificate found", c.CACert)
		}
		tc.RootCAs = pool
	}
	if (c.ClientCert == "") != (c.ClientKey == "") {
		return nil, fmt.Errorf("tls: a client certificate needs its key and a key its certificate (client cert %q, client key %q)", c.ClientCert, c.ClientKey)
	}
	if c.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate %s / key %s: %w", c.ClientCert, c.ClientKey, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	return t, nil
}
