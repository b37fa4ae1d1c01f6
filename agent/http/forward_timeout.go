package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// DefaultForwardTimeout is how long a follower waits for the leader to
// start answering a forwarded request (its response headers) before it
// gives up: a stalled leader (stopped, or cut off but not yet deposed) must
// not hold a write for longer than an election takes. Blocking queries wait
// their ?wait on top (forwardTimeout).
const DefaultForwardTimeout = 5 * time.Second

// slowForwardTimeout is the timeout of forwarded routes that legitimately
// take long before they answer: a snapshot save or restore, a full garbage
// collection.
const slowForwardTimeout = 10 * time.Minute

// slowForwardRoutes are the routes forwarded with slowForwardTimeout.
var slowForwardRoutes = map[string]bool{
	"GET /v1/operator/snapshot": true,
	"PUT /v1/operator/snapshot": true,
	"PUT /v1/system/gc":         true,
	"POST /v1/system/gc":        true,
	// An upload through a follower streams the whole body to the leader,
	// which answers once it stored, replicated and committed it.
	"PUT /v1/artifact/sha256/{hex}": true,
}

// errForwardTimeout is the cause of a forwarded request cancelled by its
// timeout.
var errForwardTimeout = errors.New("leader did not answer in time")

// forwardTimeout returns how long the forwarded request r (matched by
// pattern) may wait for the leader's response headers: base (zero means
// DefaultForwardTimeout),
// plus for a blocking query (?index=N) its wait (default 5 minutes, capped at
// 10, plus the server's jitter of up to 1/16), or slowForwardTimeout for
// the routes in slowForwardRoutes.
func forwardTimeout(r *http.Request, pattern string, base time.Duration) time.Duration {
	if base <= 0 {
		base = DefaultForwardTimeout
	}
	if slowForwardRoutes[pattern] {
		return slowForwardTimeout
	}
	q := r.URL.Query()
	if q.Get("index") == "" || q.Get("index") == "0" {
		return base
	}
	wait := structs.DefaultBlockingQueryWait
	if s := q.Get("wait"); s != "" {
		if d, err := parseWait(s); err == nil && d > 0 {
			wait = d
		}
	}
	wait = min(wait, structs.MaxBlockingQueryWait)
	return wait + wait/16 + base
}

// forwardAttempt is what the deadline transport learns about one forwarded
// request: whether it was written to the leader in full, and whether its
// timeout fired.
type forwardAttempt struct {
	timeout  time.Duration
	wrote    atomic.Bool
	timedOut atomic.Bool
}

type forwardAttemptKey struct{}

// withForwardAttempt returns r carrying a new forwardAttempt with timeout.
func withForwardAttempt(r *http.Request, timeout time.Duration) (*http.Request, *forwardAttempt) {
	fa := &forwardAttempt{timeout: timeout}
	return r.WithContext(context.WithValue(r.Context(), forwardAttemptKey{}, fa)), fa
}

// deadlineTransport enforces a forwardAttempt's timeout on the response
// headers only (a streamed body, such as a snapshot, may take longer) and
// records whether the request reached the leader.
type deadlineTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	fa, _ := req.Context().Value(forwardAttemptKey{}).(*forwardAttempt)
	if fa == nil || fa.timeout <= 0 {
		return t.base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				fa.wrote.Store(true)
			}
		},
	})
	timer := time.AfterFunc(fa.timeout, func() {
		fa.timedOut.Store(true)
		cancel(errForwardTimeout)
	})
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	stopped := timer.Stop()
	if err != nil {
		cancel(nil)
		return nil, err
	}
	if !stopped {
		// The timeout fired as the headers arrived: the body is cut off.
		_ = resp.Body.Close()
		cancel(nil)
		return nil, errForwardTimeout
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases a response's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// forwardError describes a forwarded request that got no answer from the
// leader at addr. A write that reached the leader (it was sent in full) has
// an unknown outcome: it may have been applied, so the error wraps
// structs.ErrOutcomeUnknown (504) and says to read before retrying. A write
// that never reached it, and any read, wraps structs.ErrNoLeader (503): it
// was certainly not applied and may simply be retried.
func forwardError(r *http.Request, fa *forwardAttempt, addr string, err error) error {
	what := err.Error()
	if fa.timedOut.Load() {
		what = fmt.Sprintf("no answer within %s", fa.timeout)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && fa.wrote.Load() {
		return fmt.Errorf("forward to the leader at %s: %s after the request was sent: %w", addr, what, structs.ErrOutcomeUnknown)
	}
	return fmt.Errorf("forward to the leader at %s: %s (the request was not applied; retry): %w", addr, what, structs.ErrNoLeader)
}
