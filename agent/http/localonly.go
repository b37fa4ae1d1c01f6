package http

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// LocalOnly returns next behind the checks that keep a `-dev` agent, which
// has no accounts, driven only from its own machine and its own UI. A web
// page the user visits elsewhere cannot use it:
//
//   - DNS rebinding: the Host header must name the agent by a loopback
//     name, "127.0.0.1:PORT", "localhost:PORT" or "[::1]:PORT", with PORT
//     the port the request came in on (no port when that is 80). A page
//     on evil.example whose name was re-pointed at 127.0.0.1 still sends
//     "Host: evil.example:PORT".
//   - Cross-site requests (fetch, no-cors fetch, simple form POSTs,
//     <img>/<script> GETs): the Origin header, when present, must be the
//     agent's own origin ("http://" + Host). Without Origin, a
//     Sec-Fetch-Site of "cross-site" or "same-site" (another port on
//     localhost is same-site, not same-origin) is refused, and so is a
//     Referer from another origin.
//
// A GET or HEAD navigation to the UI's pages ("/" and "/ui/...") is let
// through from other sites, so a link to the UI works; those pages only
// render, and the answer carries X-Frame-Options: DENY so no other site
// can frame them. The CLI and API clients send no Origin, Sec-Fetch-Site or
// Referer and pass. Refusals are 403 with {"error": "..."}.
func LocalOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := localOnlyProblem(r); msg != "" {
			writeJSON(w, http.StatusForbidden, errorResponse{Error: msg})
			return
		}
		w.Header().Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// localOnlyProblem returns why r is refused by LocalOnly, or "".
func localOnlyProblem(r *http.Request) string {
	port := localPort(r)
	if !loopbackHost(r.Host, port) {
		return fmt.Sprintf("dev agent: refused a request for host %q: a -dev agent answers only its loopback address "+
			"(127.0.0.1:%[2]s, localhost:%[2]s or [::1]:%[2]s); run a server agent with ACLs to serve other hosts", clipHeader(r.Host), port)
	}
	own := "http://" + strings.ToLower(r.Host)
	if r.TLS != nil {
		own = "https://" + strings.ToLower(r.Host)
	}
	uiNavigation := (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/")) &&
		r.Header.Get("Sec-Fetch-Mode") != "cors" && r.Header.Get("Sec-Fetch-Mode") != "no-cors"
	if uiNavigation {
		return ""
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !strings.EqualFold(origin, own) {
			return fmt.Sprintf("dev agent: refused a cross-site request from origin %q: a -dev agent answers only its own UI (%s) and local clients", clipHeader(origin), own)
		}
		return ""
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Sprintf("dev agent: refused a %s request (Sec-Fetch-Site): a -dev agent answers only its own UI (%s) and local clients", clipHeader(site), own)
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || !strings.EqualFold(u.Scheme+"://"+u.Host, own) {
			return fmt.Sprintf("dev agent: refused a request referred by another origin: a -dev agent answers only its own UI (%s) and local clients", own)
		}
	}
	return ""
}

// localPort returns the port of the connection r came in on, or "" when
// unknown (a test recorder).
func localPort(r *http.Request) string {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return port
}

// loopbackHost reports whether the Host header host names this agent by a
// loopback name on port (port 80 may be left out).
func loopbackHost(host, port string) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		// No port: only right when the agent listens on 80.
		h, p = strings.Trim(host, "[]"), "80"
	}
	if port != "" && p != port {
		return false
	}
	switch strings.ToLower(h) {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}

// clipHeader shortens a header value for an error message.
func clipHeader(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
