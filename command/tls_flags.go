package command

import (
	"flag"
	"os"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// tlsFlags are the common TLS flags of every command that talks to an
// agent, as Nomad's CLI has them. Each defaults to its environment
// variable: GPULAYER_CACERT, GPULAYER_CLIENT_CERT, GPULAYER_CLIENT_KEY,
// GPULAYER_TLS_SERVER_NAME, GPULAYER_SKIP_VERIFY, else the NOMAD_ one of
// the same name.
type tlsFlags struct {
	caCert, clientCert, clientKey, serverName string
	skipVerify                                bool
}

// envFirst returns the first of the variables that is set and non-empty.
func envFirst(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// register adds the TLS flags to fs.
func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.caCert, "ca-cert", envFirst("GPULAYER_CACERT", "NOMAD_CACERT"), "")
	fs.StringVar(&t.clientCert, "client-cert", envFirst("GPULAYER_CLIENT_CERT", "NOMAD_CLIENT_CERT"), "")
	fs.StringVar(&t.clientKey, "client-key", envFirst("GPULAYER_CLIENT_KEY", "NOMAD_CLIENT_KEY"), "")
	fs.StringVar(&t.serverName, "tls-server-name", envFirst("GPULAYER_TLS_SERVER_NAME", "NOMAD_TLS_SERVER_NAME"), "")
	skip, _ := strconv.ParseBool(envFirst("GPULAYER_SKIP_VERIFY", "NOMAD_SKIP_VERIFY"))
	fs.BoolVar(&t.skipVerify, "tls-skip-verify", skip, "")
}

// config returns the API client's TLS settings, or nil when no flag or
// variable asks for any.
func (t *tlsFlags) config() *api.TLSConfig {
	if t.caCert == "" && t.clientCert == "" && t.clientKey == "" && t.serverName == "" && !t.skipVerify {
		return nil
	}
	return &api.TLSConfig{
		CACert:        t.caCert,
		ClientCert:    t.clientCert,
		ClientKey:     t.clientKey,
		TLSServerName: t.serverName,
		Insecure:      t.skipVerify,
	}
}

// tlsOptions is the help text of the TLS flags, appended to
// generalOptions.
const tlsOptions = `
  -ca-cert=<path>
    The CA certificate (PEM) that verifies the agent's certificate.
    Overrides GPULAYER_CACERT.

  -client-cert=<path>
    The client certificate (PEM) to present, for agents that require one
    (tls.verify_https_client). Overrides GPULAYER_CLIENT_CERT.

  -client-key=<path>
    The key of -client-cert. Overrides GPULAYER_CLIENT_KEY.

  -tls-server-name=<name>
    The name to verify the agent's certificate against, instead of the
    address's host. Overrides GPULAYER_TLS_SERVER_NAME.

  -tls-skip-verify
    Do not verify the agent's certificate (not recommended). Overrides
    GPULAYER_SKIP_VERIFY.
`

// bareFlagSet returns a flag set without the agent flags, for commands
// that talk to no agent (tls ca create).
func (m *Meta) bareFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.errWriter())
	fs.Usage = func() {}
	return fs
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
