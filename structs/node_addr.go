package structs

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// maxNodeHTTPAddrLen bounds Node.HTTPAddr: a 253-byte DNS name, a port and
// an "https://" scheme fit.
const maxNodeHTTPAddrLen = 300

// ValidateNodeHTTPAddr checks the address a node registers for its agent's
// HTTP API, which servers dial to proxy logs, exec, signal, restart and
// telemetry: empty (the node serves no HTTP API), "host:port", or an
// "http://host:port" / "https://host:port" URL with nothing else (no
// userinfo, path, query or fragment). The port is 1 to 65535 and required;
// the host is a DNS name or an IP literal ("[::1]:4656"). Errors wrap
// ErrInvalid and name the HTTPAddr field.
func ValidateNodeHTTPAddr(addr string) error {
	if addr == "" {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: HTTPAddr %q: %s; want host:port or http(s)://host:port", ErrInvalid, clip(addr), why)
	}
	if len(addr) > maxNodeHTTPAddrLen {
		return bad(fmt.Sprintf("longer than %d bytes", maxNodeHTTPAddrLen))
	}
	hostport := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return bad("not a URL")
		}
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			return bad("scheme is not http or https")
		case u.User != nil:
			return bad("has userinfo")
		case u.Path != "" && u.Path != "/", u.RawPath != "":
			return bad("has a path")
		case u.RawQuery != "" || u.ForceQuery:
			return bad("has a query")
		case u.Fragment != "" || strings.Contains(addr, "#"):
			return bad("has a fragment")
		case u.Opaque != "":
			return bad("not a URL")
		}
		hostport = u.Host
	}
	if strings.ContainsAny(hostport, "/?#@ \t\r\n\\") {
		return bad("has characters that are not part of host:port")
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return bad("no port")
	}
	if host == "" {
		return bad("no host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || port != strconv.Itoa(p) {
		return bad("port is not 1 to 65535")
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return bad("host is not an IP literal")
	}
	if net.ParseIP(host) == nil {
		for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
			if label == "" || len(label) > 63 {
				return bad("host is not a DNS name")
			}
			for _, c := range label {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
					return bad("host is not a DNS name")
				}
			}
		}
	}
	return nil
}
