package http

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// HeaderForwarded marks a request one server forwarded to the leader. A
// server that is not the leader answers such a request with 503 instead
// of forwarding it again, so a leadership change cannot loop a request
// between servers.
const HeaderForwarded = "X-Gpulayer-Forwarded"

// leaderRoutes are the routes that change cluster state: on a follower
// they are forwarded to the leader. A new write route must be added here.
var leaderRoutes = map[string]bool{
	"PUT /v1/jobs":                   true,
	"POST /v1/jobs":                  true,
	"DELETE /v1/job/{id}":            true,
	"PUT /v1/node/register":          true,
	"PUT /v1/node/{id}/heartbeat":    true,
	"POST /v1/node/{id}/allocations": true,
	"DELETE /v1/operator/raft/peer":  true,
	"PUT /v1/operator/snapshot":      true,
	"POST /v1/allocation/{id}/stop":  true,
	"POST /v1/node/{id}/drain":       true,
	"POST /v1/node/{id}/eligibility": true,
	"GET /v1/operator/snapshot":      true, // unless ?stale
	"PUT /v1/system/gc":              true,
	"POST /v1/system/gc":             true,
	// Nomad API compatibility (issue 12): Nomad's method for alloc stop.
	"PUT /v1/allocation/{id}/stop": true,
	// ACL writes and node secret rotation.
	"PUT /v1/acl/bootstrap":           true,
	"POST /v1/acl/bootstrap":          true,
	"PUT /v1/acl/policy/{name}":       true,
	"POST /v1/acl/policy/{name}":      true,
	"DELETE /v1/acl/policy/{name}":    true,
	"PUT /v1/acl/token":               true,
	"POST /v1/acl/token":              true,
	"PUT /v1/acl/token/{accessor}":    true,
	"POST /v1/acl/token/{accessor}":   true,
	"DELETE /v1/acl/token/{accessor}": true,
	"PUT /v1/node/{id}/secret/rotate": true,
	// Artifacts: the leader stores the bytes, pushes them to the other
	// servers and commits the metadata; missing is answered from the
	// leader's state so a digest collected a moment ago is not skipped.
	"PUT /v1/artifact/sha256/{hex}": true,
	"POST /v1/artifacts/missing":    true,
	// Services.
	"DELETE /v1/service/{name}/{id}": true,
	"POST /v1/node/{id}/services":    true,
	// Periodic and parameterized jobs.
	"PUT /v1/job/{id}/dispatch":        true,
	"POST /v1/job/{id}/dispatch":       true,
	"PUT /v1/job/{id}/periodic/force":  true,
	"POST /v1/job/{id}/periodic/force": true,
	// Node pools.
	"PUT /v1/node/pools":          true,
	"POST /v1/node/pools":         true,
	"DELETE /v1/node/pool/{name}": true,
}

// consistentRoutes are reads the leader answers (a follower forwards them)
// unless the request says ?stale: then this server answers from its own
// state once it has caught up since it started. ?consistent (or
// ?stale=false) also makes the HTTP layer confirm leadership first.
var consistentRoutes = map[string]bool{
	"GET /v1/jobs":                  true,
	"GET /v1/job/{id}":              true,
	"GET /v1/job/{id}/allocations":  true,
	"GET /v1/job/{id}/evaluations":  true,
	"GET /v1/allocations":           true,
	"GET /v1/allocation/{id}":       true,
	"GET /v1/evaluation/{id}":       true,
	"GET /v1/nodes":                 true,
	"GET /v1/node/{id}":             true,
	"GET /v1/node/{id}/allocations": true,
	// Client-only allocation change routes: reads, both.
	"GET /v1/node/{id}/client-allocs":        true,
	"POST /v1/node/{id}/client-allocs/fetch": true,
	"GET /v1/operator/raft/configuration":    true,
	// Node pools.
	"GET /v1/node/pools":             true,
	"GET /v1/node/pool/{name}":       true,
	"GET /v1/node/pool/{name}/nodes": true,
	"GET /v1/node/pool/{name}/jobs":  true,
}

// forwarder proxies requests to the leader's HTTP API.
type forwarder struct {
	h         *handler
	transport *http.Transport
	// scheme is "https" when the agent's tls.http is on.
	scheme string
	// timeout is the base response timeout of a forwarded request; zero
	// means DefaultForwardTimeout (forward_timeout.go).
	timeout time.Duration
}

func newForwarder(h *handler) *forwarder {
	f := &forwarder{h: h, transport: &http.Transport{
		Proxy:                 nil, // servers talk directly
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // blocking queries may wait up to 10 minutes
	}, scheme: "http"}
	if h.serverTLS != nil {
		// Only a certificate for server.<region>.gpulayer is a leader.
		f.transport.TLSClientConfig = h.serverTLS.Clone()
		f.scheme = "https"
	}
	return f
}

// wantsConsistent reports whether a read asks for a consistent answer:
// ?consistent (any value but false) or an explicit ?stale=false.
func wantsConsistent(r *http.Request) bool {
	q := r.URL.Query()
	if q.Has("consistent") {
		v := q.Get("consistent")
		if b, err := strconv.ParseBool(v); v == "" || err != nil || b {
			return true
		}
	}
	if q.Has("stale") {
		if b, err := strconv.ParseBool(q.Get("stale")); err == nil && !b {
			return true
		}
	}
	return false
}

// maybeForward decides where the request matched by pattern runs. It
// returns true when it answered the request: forwarded it to the leader,
// or refused it with 503 (no leader known, a forwarded request that reached
// a follower, or a consistent read on a leader that lost its quorum). It
// returns false when the local handler should run: this server leads, or
// the route may answer from local state.
func (h *handler) maybeForward(w http.ResponseWriter, r *http.Request, pattern string) bool {
	if h.cluster == nil {
		return false
	}
	leaderOnly := leaderRoutes[pattern]
	if pattern == "GET /v1/operator/snapshot" {
		if stale, err := parseBool(r, "stale"); err == nil && stale {
			leaderOnly = false
		}
	}
	consistent := consistentRoutes[pattern] && wantsConsistent(r)
	// By default a read is answered by the leader (Nomad's and Consul's
	// contract; the server confirms its leadership and readiness); only
	// ?stale may be answered here (consistency.go in package server), and
	// only within its ?max_stale (forward_stale.go).
	if !leaderOnly && !consistent && !(consistentRoutes[pattern] && (!allowsStale(r) || h.staleTooOld(r))) {
		return false
	}
	if h.cluster.IsLeader() {
		if consistent {
			if err := h.cluster.VerifyLeader(r.Context()); err != nil {
				h.writeError(w, r, err)
				return true
			}
		}
		return false
	}
	if r.Header.Get(HeaderForwarded) != "" {
		h.writeError(w, r, fmt.Errorf("forwarded request reached a server that is not the leader (leadership is changing; retry): %w", structs.ErrNotLeader))
		return true
	}
	addr := h.cluster.LeaderHTTPAddr()
	if addr == "" {
		h.writeError(w, r, fmt.Errorf("cannot forward to the leader: its HTTP address is unknown: %w", structs.ErrNoLeader))
		return true
	}
	h.fwd.proxy(w, r, addr, pattern)
	return true
}

// allowsStale reports whether a read asks to be answered from this
// server's own state (?stale, ?stale=true).
func allowsStale(r *http.Request) bool {
	stale, err := parseBool(r, "stale")
	return err == nil && stale
}

// proxy sends r to the leader at addr ("host:port") and copies the answer
// back, streaming (blocking queries, snapshots).
func (f *forwarder) proxy(w http.ResponseWriter, r *http.Request, addr, pattern string) {
	r, fa := withForwardAttempt(r, forwardTimeout(r, pattern, f.timeout))
	target := &url.URL{Scheme: f.scheme, Host: addr}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwarded, "1")
		},
		Transport:     deadlineTransport{base: f.transport},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, r.Context().Err()) {
				return // the caller went away
			}
			f.h.writeError(w, r, forwardError(r, fa, addr, err))
		},
	}
	f.h.logger.Debug("forwarding to the leader", "method", r.Method, "path", r.URL.Path, "leader", addr)
	rp.ServeHTTP(w, r)
}
