package command

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
)

// TLSCommand groups the tls subcommands; run alone it prints help.
type TLSCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *TLSCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer tls <subcommand> [options]

  Makes a private PKI for a cluster, as Nomad's "tls" commands do:
  "tls ca create" writes a CA, "tls cert create -server|-client|-cli"
  writes certificates signed by it. See website/docs/tls.md.
`)
}

// Synopsis returns a one-line description.
func (c *TLSCommand) Synopsis() string { return "Generate a TLS CA and certificates" }

// Run prints help; see groupRun.
func (c *TLSCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// TLSCACommand groups "tls ca" subcommands.
type TLSCACommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *TLSCACommand) Help() string {
	return "Usage: gpulayer tls ca create [options]\n\n  Creates a certificate authority for the cluster's agents."
}

// Synopsis returns a one-line description.
func (c *TLSCACommand) Synopsis() string { return "Manage the cluster's certificate authority" }

// Run prints help; see groupRun.
func (c *TLSCACommand) Run(args []string) int { return c.Meta.groupRun(args) }

// TLSCertCommand groups "tls cert" subcommands.
type TLSCertCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *TLSCertCommand) Help() string {
	return "Usage: gpulayer tls cert create -server|-client|-cli [options]\n\n  Creates a certificate signed by the cluster's CA."
}

// Synopsis returns a one-line description.
func (c *TLSCertCommand) Synopsis() string { return "Create agent and CLI certificates" }

// Run prints help; see groupRun.
func (c *TLSCertCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// TLSCACreateCommand writes a new CA (gpulayer-agent-ca.pem and
// gpulayer-agent-ca-key.pem) to the working directory.
type TLSCACreateCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *TLSCACreateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer tls ca create [options]

  Creates a certificate authority: an ECDSA P-256 key and a self-signed
  certificate, written to gpulayer-agent-ca.pem and
  gpulayer-agent-ca-key.pem (mode 0600) in the current directory. Existing
  files are never overwritten. It talks to no agent.

CA Create Options:

  -days=<int>
    Validity of the CA certificate in days, at most 3650. Default 1825.

  -common-name=<string>
    The CA certificate's common name. Default "GPUlayer Agent CA <serial>".
`)
}

// Synopsis returns a one-line description.
func (c *TLSCACreateCommand) Synopsis() string { return "Create a certificate authority" }

// Run writes the CA files.
func (c *TLSCACreateCommand) Run(args []string) int {
	fs := c.Meta.bareFlagSet("tls ca create")
	days := fs.Int("days", tlsutil.DefaultCADays, "")
	cn := fs.String("common-name", "", "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 0 {
		c.Meta.UI.Error("This command takes no arguments")
		return cli.RunResultHelp
	}
	pair, err := tlsutil.GenerateCA(tlsutil.CAOptions{Days: *days, CommonName: *cn})
	if err != nil {
		return c.Meta.errorf("Error creating the CA: %v", err)
	}
	if err := writeNew(tlsutil.CAFileName, pair.Cert, tlsutil.CAKeyFileName, pair.Key); err != nil {
		return c.Meta.errorf("Error writing the CA: %v", err)
	}
	c.Meta.UI.Output("==> CA certificate saved to: " + tlsutil.CAFileName)
	c.Meta.UI.Output("==> CA certificate key saved to: " + tlsutil.CAKeyFileName)
	return 0
}

// TLSCertCreateCommand writes a certificate for a server, client or CLI,
// signed by the CA.
type TLSCertCreateCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *TLSCertCreateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer tls cert create -server|-client|-cli [options]

  Creates a certificate signed by the CA, for one role:

    -server  server.<region>.gpulayer   (Raft, serving the API, forwarding)
    -client  client.<region>.gpulayer   (client agents)
    -cli     cli.<region>.gpulayer      (the CLI and other API callers)

  Server and client certificates also name localhost and 127.0.0.1. The
  files are <region>-<role>-gpulayer.pem and <region>-<role>-gpulayer-key.pem
  (mode 0600) in the current directory; existing files are never
  overwritten. It talks to no agent.

Cert Create Options:

  -ca=<path>   The CA certificate. Default gpulayer-agent-ca.pem.
  -key=<path>  The CA key. Default gpulayer-agent-ca-key.pem.
  -region=<name>
    The region the certificate is for. Default "global".
  -days=<int>
    Validity in days, at most 3650. Default 365.
  -additional-dnsname=<name>
    A further DNS name; may be given more than once.
  -additional-ipaddress=<ip>
    A further IP address; may be given more than once.
`)
}

// Synopsis returns a one-line description.
func (c *TLSCertCreateCommand) Synopsis() string { return "Create a certificate" }

// Run writes the certificate files.
func (c *TLSCertCreateCommand) Run(args []string) int {
	fs := c.Meta.bareFlagSet("tls cert create")
	server := fs.Bool("server", false, "")
	client := fs.Bool("client", false, "")
	cliRole := fs.Bool("cli", false, "")
	caFile := fs.String("ca", tlsutil.CAFileName, "")
	keyFile := fs.String("key", tlsutil.CAKeyFileName, "")
	region := fs.String("region", tlsutil.DefaultRegion, "")
	days := fs.Int("days", tlsutil.DefaultCertDays, "")
	var dns, ips stringList
	fs.Var(&dns, "additional-dnsname", "")
	fs.Var(&ips, "additional-ipaddress", "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 0 {
		c.Meta.UI.Error("This command takes no arguments")
		return cli.RunResultHelp
	}
	var roles []tlsutil.Role
	for _, r := range []struct {
		set  bool
		role tlsutil.Role
	}{{*server, tlsutil.RoleServer}, {*client, tlsutil.RoleClient}, {*cliRole, tlsutil.RoleCLI}} {
		if r.set {
			roles = append(roles, r.role)
		}
	}
	if len(roles) != 1 {
		c.Meta.UI.Error("Exactly one of -server, -client or -cli is required")
		return cli.RunResultHelp
	}
	var ipAddrs []net.IP
	for i, s := range ips {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return c.Meta.errorf("Error: -additional-ipaddress[%d]: %q is not an IP address", i, s)
		}
		ipAddrs = append(ipAddrs, ip)
	}
	caCert, err := os.ReadFile(*caFile)
	if err != nil {
		return c.Meta.errorf("Error reading the CA certificate (-ca): %v", err)
	}
	caKey, err := os.ReadFile(*keyFile)
	if err != nil {
		return c.Meta.errorf("Error reading the CA key (-key): %v", err)
	}
	pair, err := tlsutil.GenerateCert(&tlsutil.PEMPair{Cert: caCert, Key: caKey}, tlsutil.CertOptions{
		Role: roles[0], Region: *region, Days: *days, DNSNames: dns, IPAddresses: ipAddrs,
	})
	if err != nil {
		return c.Meta.errorf("Error creating the certificate: %v", err)
	}
	certName, keyName := tlsutil.CertFileNames(roles[0], *region)
	if err := writeNew(certName, pair.Cert, keyName, pair.Key); err != nil {
		return c.Meta.errorf("Error writing the certificate: %v", err)
	}
	c.Meta.UI.Output("==> Using CA file " + *caFile + " and CA key " + *keyFile)
	c.Meta.UI.Output("==> Certificate for " + roles[0].Name(*region) + " saved to: " + certName)
	c.Meta.UI.Output("==> Certificate key saved to: " + keyName)
	return 0
}

// writeNew writes a certificate (mode 0644) and its key (mode 0600),
// refusing to overwrite either. On a failure after the certificate is
// written, the certificate is removed again.
func writeNew(certPath string, cert []byte, keyPath string, key []byte) error {
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s already exists; remove it first or run in another directory", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := writeExclusive(certPath, cert, 0o644); err != nil {
		return err
	}
	if err := writeExclusive(keyPath, key, 0o600); err != nil {
		_ = os.Remove(certPath)
		return err
	}
	return nil
}

func writeExclusive(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(filepath.Clean(path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
