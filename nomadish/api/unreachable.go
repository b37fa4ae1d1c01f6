package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
)

// UnreachableError is the error of a request that no agent answered: the
// connection was refused, the host name does not resolve, or the dial
// timed out. Address is the agent address the client was made for. It
// unwraps to the transport's error.
type UnreachableError struct {
	Address string
	Err     error
}

// Error renders "no GPUlayer agent answers at http://127.0.0.1:4656
// (dial tcp 127.0.0.1:4656: connect: connection refused)".
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no GPUlayer agent answers at %s (%v)", e.Address, e.cause())
}

// cause is the innermost network error, without the method and URL the
// *url.Error adds.
func (e *UnreachableError) cause() error {
	var ue *url.Error
	if errors.As(e.Err, &ue) {
		return ue.Err
	}
	return e.Err
}

// Unwrap returns the transport's error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err is (or wraps) an *UnreachableError.
func IsUnreachable(err error) bool {
	var ue *UnreachableError
	return errors.As(err, &ue)
}

// unreachable wraps err, the error of http.Client.Do, in an
// *UnreachableError when no agent answered at all (a refused or failed
// dial, an unknown host); other errors (a canceled context, a reset
// connection mid-answer, a TLS failure) are returned as they are.
func (c *Client) unreachable(err error) error {
	// A request the caller canceled while it dialed was not refused.
	if errors.Is(err, context.Canceled) || !isDialError(err) {
		return err
	}
	return &UnreachableError{Address: c.base.String(), Err: err}
}

// isDialError reports whether err failed while connecting.
func isDialError(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
