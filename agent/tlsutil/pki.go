package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Defaults of the test PKI, as Nomad's `tls ca create` (5 years) and `tls
// cert create` (1 year).
const (
	DefaultCADays   = 1825
	DefaultCertDays = 365
	// MaxDays bounds -days: certificates valid longer than 10 years are
	// refused.
	MaxDays = 3650
	// maxExtraNames bounds the additional DNS names and IP addresses of
	// one certificate.
	maxExtraNames = 100
)

// CAOptions shape a new CA. Zero values take the documented defaults.
type CAOptions struct {
	// Days is the validity in days; 0 means DefaultCADays, at most MaxDays.
	Days int
	// CommonName defaults to "GPUlayer Agent CA <serial>".
	CommonName string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// CertOptions shape a new agent or CLI certificate.
type CertOptions struct {
	// Role is RoleServer, RoleClient or RoleCLI. Required.
	Role Role
	// Region defaults to DefaultRegion.
	Region string
	// Days is the validity in days; 0 means DefaultCertDays, at most
	// MaxDays.
	Days int
	// DNSNames and IPAddresses are added to the SANs. Server and client
	// certificates always carry the role name, "localhost" and 127.0.0.1;
	// CLI certificates carry the role name and "localhost".
	DNSNames    []string
	IPAddresses []net.IP
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// PEMPair is a certificate and its private key, PEM-encoded.
type PEMPair struct {
	Cert []byte
	Key  []byte
}

// GenerateCA makes a self-signed ECDSA P-256 CA certificate and key. It
// returns an error naming the option when Days is out of range.
func GenerateCA(opts CAOptions) (*PEMPair, error) {
	days, err := checkDays(opts.Days, DefaultCADays)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	cn := opts.CommonName
	if cn == "" {
		cn = "GPUlayer Agent CA " + serial.String()
	}
	now := clock(opts.Now)
	skid, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"GPUlayer"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid,
		AuthorityKeyId:        skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	return encodePair(der, key)
}

// GenerateCert makes a certificate for opts.Role signed by the CA in ca
// (PEM certificate and key, as GenerateCA writes them). Server and client
// certificates may serve and dial (server and client auth); CLI
// certificates may only dial. It returns an error naming the option.
func GenerateCert(ca *PEMPair, opts CertOptions) (*PEMPair, error) {
	switch opts.Role {
	case RoleServer, RoleClient, RoleCLI:
	default:
		return nil, fmt.Errorf("role: %q is not server, client or cli", opts.Role)
	}
	if err := checkRegion(opts.Region); err != nil {
		return nil, err
	}
	days, err := checkDays(opts.Days, DefaultCertDays)
	if err != nil {
		return nil, err
	}
	if len(opts.DNSNames) > maxExtraNames || len(opts.IPAddresses) > maxExtraNames {
		return nil, fmt.Errorf("additional names: at most %d DNS names and %d IP addresses", maxExtraNames, maxExtraNames)
	}
	caCert, caKey, err := parseCA(ca)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	name := opts.Role.Name(opts.Region)
	dns := []string{name, "localhost"}
	var ips []net.IP
	if opts.Role != RoleCLI {
		ips = append(ips, net.IPv4(127, 0, 0, 1))
	}
	for i, d := range opts.DNSNames {
		d = strings.TrimSpace(d)
		if d == "" || strings.ContainsAny(d, " /:") {
			return nil, fmt.Errorf("additional-dnsname[%d]: %q is not a DNS name", i, d)
		}
		dns = append(dns, d)
	}
	ips = append(ips, opts.IPAddresses...)
	ext := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if opts.Role == RoleCLI {
		ext = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	now := clock(opts.Now)
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: name},
		NotBefore:      now.Add(-time.Minute),
		NotAfter:       now.AddDate(0, 0, days),
		KeyUsage:       x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:    ext,
		DNSNames:       dns,
		IPAddresses:    ips,
		AuthorityKeyId: caCert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	return encodePair(der, key)
}

// CertFileNames returns the file names `tls cert create` writes for role
// in region: "global-server-gpulayer.pem" and
// "global-server-gpulayer-key.pem".
func CertFileNames(role Role, region string) (cert, key string) {
	if region == "" {
		region = DefaultRegion
	}
	base := region + "-" + string(role) + "-" + Domain
	return base + ".pem", base + "-key.pem"
}

// The CA's file names, as `tls ca create` writes them.
const (
	CAFileName    = "gpulayer-agent-ca.pem"
	CAKeyFileName = "gpulayer-agent-ca-key.pem"
)

func checkDays(days, def int) (int, error) {
	if days == 0 {
		return def, nil
	}
	if days < 1 || days > MaxDays {
		return 0, fmt.Errorf("days: %d is not between 1 and %d", days, MaxDays)
	}
	return days, nil
}

// checkRegion accepts an empty region (the default) or a DNS label.
func checkRegion(r string) error {
	if r == "" {
		return nil
	}
	if len(r) > 63 {
		return fmt.Errorf("region: %q is longer than 63 characters", r)
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("region: %q must be lowercase letters, digits and '-'", r)
		}
	}
	return nil
}

func clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func keyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return sum[:20], nil
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (*PEMPair, error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &PEMPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

// parseCA decodes a CA pair written by GenerateCA (or any PEM certificate
// with an EC, PKCS#1 or PKCS#8 key).
func parseCA(ca *PEMPair) (*x509.Certificate, crypto.Signer, error) {
	if ca == nil {
		return nil, nil, errors.New("ca: no CA given")
	}
	cb, _ := pem.Decode(ca.Cert)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("ca: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("ca: %w", err)
	}
	if !cert.IsCA {
		return nil, nil, errors.New("ca: the certificate is not a CA")
	}
	kb, _ := pem.Decode(ca.Key)
	if kb == nil {
		return nil, nil, errors.New("ca key: no PEM block")
	}
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ca key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("ca key: not a signing key")
	}
	return cert, signer, nil
}

// CheckRegion returns an error naming the "region" field unless region is
// empty (the default) or a lowercase DNS label, as certificate names need.
func CheckRegion(region string) error { return checkRegion(region) }
