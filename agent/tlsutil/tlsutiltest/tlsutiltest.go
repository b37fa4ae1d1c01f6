// Package tlsutiltest writes a throw-away PKI (a CA and certificates of
// each role) for tests of any package.
package tlsutiltest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
)

// TestPKI is a CA and one certificate per role written to a directory,
// for tests in other packages (the agent's cluster tests, server's Raft
// tests).
type TestPKI struct {
	Dir string
	// CAFile and CAKeyFile are the CA's files.
	CAFile, CAKeyFile string
	// CA is the CA pair, for signing further certificates.
	CA *tlsutil.PEMPair
}

// WriteTestPKI makes a CA in dir (gpulayer-agent-ca.pem and its key). It
// returns the error of the first failed step.
func WriteTestPKI(dir string) (*TestPKI, error) {
	ca, err := tlsutil.GenerateCA(tlsutil.CAOptions{})
	if err != nil {
		return nil, err
	}
	p := &TestPKI{Dir: dir, CA: ca, CAFile: filepath.Join(dir, tlsutil.CAFileName), CAKeyFile: filepath.Join(dir, tlsutil.CAKeyFileName)}
	if err := os.WriteFile(p.CAFile, ca.Cert, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.CAKeyFile, ca.Key, 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// Cert writes a certificate for role in region under the PKI's directory
// (prefixed with name so several of one role can coexist) and returns its
// certificate and key file paths.
func (p *TestPKI) Cert(name string, opts tlsutil.CertOptions) (certFile, keyFile string, err error) {
	pair, err := tlsutil.GenerateCert(p.CA, opts)
	if err != nil {
		return "", "", err
	}
	c, k := tlsutil.CertFileNames(opts.Role, opts.Region)
	certFile, keyFile = filepath.Join(p.Dir, name+"-"+c), filepath.Join(p.Dir, name+"-"+k)
	if err := os.WriteFile(certFile, pair.Cert, 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, pair.Key, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

// Bundle loads a tlsutil.Bundle for a new certificate of role in region with the
// given tls settings (files filled in).
func (p *TestPKI) Bundle(name string, cfg tlsutil.Config, opts tlsutil.CertOptions) (*tlsutil.Bundle, error) {
	cf, kf, err := p.Cert(name, opts)
	if err != nil {
		return nil, err
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = p.CAFile, cf, kf
	if !cfg.Enabled() {
		cfg.RPC = true
	}
	return tlsutil.Load(cfg, opts.Region)
}
