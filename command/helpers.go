package command

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// shortIDLength is how many characters of a UUID lists show, as in Nomad.
const shortIDLength = 8

// flagSet returns a flag set for the command name with the common -address
// flag and, for read commands, -json. Flag errors print to the UI.
func (m *Meta) flagSet(name string, withJSON bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.errWriter())
	fs.Usage = func() {}
	def := os.Getenv("GPULAYER_ADDR")
	if def == "" {
		def = api.DefaultAddress
	}
	fs.StringVar(&m.address, "address", def, "")
	m.tls.register(fs)
	fs.StringVar(&m.token, "token", api.EnvToken(), "")
	if withJSON {
		fs.BoolVar(&m.jsonOutput, "json", false, "")
	}
	return fs
}

// generalOptions is the help text of the common flags.
const generalOptions = `
General Options:

  -address=<addr>
    The address of the GPUlayer agent. Overrides the GPULAYER_ADDR
    environment variable. Default: http://127.0.0.1:4656.

  -token=<secret>
    The ACL token's SecretID. Overrides the GPULAYER_TOKEN environment
    variable (NOMAD_TOKEN is read too). Not needed with -dev.
` + tlsOptions

// jsonOption is the help text of -json.
const jsonOption = `
  -json
    Print the API object as pretty JSON instead of the table.
`

// client returns an API client for -address.
func (m *Meta) client() (*api.Client, error) {
	return api.NewClient(&api.Config{Address: m.address, Token: m.token, TLSConfig: m.tls.config(), Namespace: m.namespace})
}

// namespaceFlag registers -namespace on fs, defaulting to
// GPULAYER_NAMESPACE, else NOMAD_NAMESPACE; the client of m.client()
// then sends it as ?namespace= on every request.
func (m *Meta) namespaceFlag(fs *flag.FlagSet) {
	fs.StringVar(&m.namespace, "namespace", api.EnvNamespace(), "")
}

// namespaceOption is the help text of -namespace.
const namespaceOption = `
  -namespace=<namespace>
    The namespace the requests act in (sent as ?namespace=). Overrides
    the GPULAYER_NAMESPACE environment variable (NOMAD_NAMESPACE is read
    too). Default: "default".
`

// optionsOnly parses args with fs for a command that takes options but no
// arguments, and returns the API client for -address. When the client is
// nil, code is the exit code to return: cli.RunResultHelp for a bad flag
// or an argument, 1 when the client cannot be made.
func (m *Meta) optionsOnly(fs *flag.FlagSet, args []string) (client *api.Client, code int) {
	if err := fs.Parse(args); err != nil {
		return nil, cli.RunResultHelp
	}
	if fs.NArg() != 0 {
		m.UI.Error("This command takes no arguments")
		return nil, cli.RunResultHelp
	}
	client, err := m.client()
	if err != nil {
		return nil, m.errorf("Error initializing client: %v", err)
	}
	return client, 0
}

// printJSON prints v as indented JSON.
func (m *Meta) printJSON(v interface{}) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		m.UI.Error(fmt.Sprintf("Error encoding JSON: %v", err))
		return 1
	}
	m.UI.Output(string(b))
	return 0
}

// table renders rows under headers in columns two spaces apart.
func table(headers []string, rows [][]string) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	return strings.TrimRight(sb.String(), "\n")
}

// kv renders "Key = Value" lines with the = signs aligned, as Nomad's
// formatKV does.
func kv(pairs [][2]string) string {
	width := 0
	for _, p := range pairs {
		if len(p[0]) > width {
			width = len(p[0])
		}
	}
	lines := make([]string, len(pairs))
	for i, p := range pairs {
		v := p[1]
		if v == "" {
			v = "<none>"
		}
		lines[i] = fmt.Sprintf("%-*s = %s", width, p[0], v)
	}
	return strings.Join(lines, "\n")
}

// shortID returns the first eight characters of id.
func shortID(id string) string {
	if len(id) > shortIDLength {
		return id[:shortIDLength]
	}
	return id
}

// formatUnixNano renders Unix nanoseconds as RFC 3339 in m.Location; zero
// is "<none>".
func (m *Meta) formatUnixNano(ns int64) string {
	if ns == 0 {
		return "<none>"
	}
	return time.Unix(0, ns).In(m.Location).Format(time.RFC3339)
}

// formatTime renders t in RFC 3339 in the meta's location, or "<none>"
// for the zero time.
func (m *Meta) formatTime(t time.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	return t.In(m.Location).Format(time.RFC3339)
}

// timestamp is the monitor's current time in RFC 3339.
func (m *Meta) timestamp() string {
	return m.Now().In(m.Location).Format(time.RFC3339)
}

// sortedKeys returns the keys of a map in order.
func sortedKeys[V any](mp map[string]V) []string {
	keys := make([]string, 0, len(mp))
	for k := range mp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// orNone returns s, or "<none>" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// errorf prints an error line, with a hint of what to do for errors
// among a that have one (withHints), and returns exit code 1.
func (m *Meta) errorf(format string, a ...any) int {
	m.UI.Error(m.withHints(fmt.Sprintf(format, a...), a))
	return 1
}
