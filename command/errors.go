package command

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// Errors that tell the user what to do next: a flag written after the
// arguments, an address no agent answers at, a jobspec the server
// rejected (at the file:line:col of the field it names).

// argError prints msg, the problem with the positional arguments args
// (what fs, the flag set of a command such as "job run", left), and
// returns the exit code of a usage error. When an argument after the
// first starts with "-" it was meant as a flag, which Go's flag parsing
// stops reading at the first argument: the message then shows the
// command line with the flags (and their values) first.
func (m *Meta) argError(fs *flag.FlagSet, args []string, msg string) int {
	var flags, rest []string
	var names []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if i == 0 || len(a) < 2 || !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		names = append(names, a)
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil && !hasValue && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if len(names) > 0 {
		msg += fmt.Sprintf("\n%s came after the argument %q: flags go before the arguments, e.g.\n  gpulayer %s %s %s",
			quoteAll(names), args[0], fs.Name(), strings.Join(flags, " "), strings.Join(rest, " "))
	}
	m.UI.Error(msg)
	return cli.RunResultHelp
}

// isBoolFlag reports whether f takes no value (-detach, -json).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// quoteAll renders words as "a", "b".
func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	return strings.Join(q, ", ")
}

// unreachableHint is what to do when no agent answers at the address.
const unreachableHint = "Start one with `gpulayer agent -dev`, or point -address or GPULAYER_ADDR at a running agent."

// withHints appends to an error line the hint for the errors among args
// that have one: an agent that does not answer, a refused token, a TLS
// handshake that needs a flag.
func (m *Meta) withHints(line string, args []any) string {
	for _, a := range args {
		err, ok := a.(error)
		if !ok {
			continue
		}
		if api.IsUnreachable(err) {
			return line + "\n" + unreachableHint
		}
		if h := m.aclHint(err); h != "" {
			return line + "\n" + h
		}
		if h := tlsHint(err); h != "" {
			return line + "\n" + h
		}
	}
	return line
}

// aclHint says what to do about a 403: which token was sent decides it.
func (m *Meta) aclHint(err error) string {
	var se *api.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusForbidden {
		return ""
	}
	switch {
	case m.token == "":
		return "No ACL token was sent, and served agents have ACLs on by default: pass -token or set GPULAYER_TOKEN " +
			"(NOMAD_TOKEN is read too). A new cluster's first token comes from `gpulayer acl bootstrap`."
	case strings.Contains(se.Message, "ACL token not found"), strings.Contains(se.Message, "ACL token expired"):
		return "The token given by -token or GPULAYER_TOKEN is not one the cluster knows (or it expired): check it, or ask for a new one."
	default:
		return "The token given lacks the rights this command needs: `gpulayer acl token self` shows its policies, " +
			"and website/docs/acl.md lists what each route needs."
	}
}

// tlsHint names the flag a failed TLS handshake or a scheme mismatch
// calls for.
func tlsHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "The agent's certificate is not signed by a CA this command trusts: pass -ca-cert or set GPULAYER_CACERT (website/docs/tls.md)."
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "tls: bad certificate"):
		return "The agent requires a client certificate signed by its CA: pass -client-cert and -client-key, or set " +
			"GPULAYER_CLIENT_CERT and GPULAYER_CLIENT_KEY (make one with `gpulayer tls cert create -cli`)."
	case strings.Contains(msg, "HTTP request to an HTTPS server"):
		return "The agent speaks HTTPS: use an https:// address (-address or GPULAYER_ADDR) with -ca-cert and a client certificate."
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "The agent speaks plain HTTP: use an http:// address."
	case strings.Contains(msg, "x509: certificate is valid for"):
		return "The agent's certificate is for another name: agents' certificates name server.<region>.gpulayer or " +
			"client.<region>.gpulayer; pass -tls-server-name or set GPULAYER_TLS_SERVER_NAME."
	}
	return ""
}

// jobSubmitError prints the error of a job register or plan request.
// A validation error of the server (400, "invalid job: ...") is shown
// problem by problem at the file:line:col of the field each names, as the
// parser's own errors are; any other error as "prefix: err".
func (m *Meta) jobSubmitError(prefix string, err error, pos *jobspec.Positions) int {
	var se *api.StatusError
	if errors.As(err, &se) && se.Code == http.StatusBadRequest {
		if text, ok := pos.Annotate(se.Message); ok {
			return m.errorf("%s: the server rejected the jobspec:\n%s", prefix, text)
		}
	}
	return m.errorf("%s: %v", prefix, err)
}
