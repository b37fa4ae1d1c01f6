package tlsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// TestPKI is a CA and one certificate per role written to a directory,
// for tests in other packages (the agent's cluster tests, server's Raft
// tests).
type TestPKI struct {
	Dir string
	// CAFile and CAKeyFile are the CA's files.
	CAFile, CAKeyFile string
	// CA is the CA pair, for signing further certificates.
	CA *PEMPair
}

// WriteTestPKI makes a CA in dir (gpulayer-agent-ca.pem and its key). It
// returns the error of the first failed step.
func WriteTestPKI(dir string) (*TestPKI, error) {
	ca, err := GenerateCA(CAOptions{})
	if err != nil {
		return nil, err
	}
	p := &TestPKI{Dir: dir, CA: ca, CAFile: filepath.Join(dir, CAFileName), CAKeyFile: filepath.Join(dir, CAKeyFileName)}
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
func (p *TestPKI) Cert(name string, opts CertOptions) (certFile, keyFile string, err error) {
	pair, err := GenerateCert(p.CA, opts)
	if err != nil {
		return "", "", err
	}
	c, k := CertFileNames(opts.Role, opts.Region)
	certFile, keyFile = filepath.Join(p.Dir, name+"-"+c), filepath.Join(p.Dir, name+"-"+k)
	if err := os.WriteFile(certFile, pair.Cert, 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, pair.Key, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

// Bundle loads a Bundle for a new certificate of role in region with the
// given tls settings (files filled in).
func (p *TestPKI) Bundle(name string, cfg Config, opts CertOptions) (*Bundle, error) {
	cf, kf, err := p.Cert(name, opts)
	if err != nil {
		return nil, err
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = p.CAFile, cf, kf
	if !cfg.Enabled() {
		cfg.RPC = true
	}
	return Load(cfg, opts.Region)
}
