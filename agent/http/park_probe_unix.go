//go:build unix

package http

import (
	"errors"
	"net"
	"syscall"
)

// probeParked looks, without reading anything, at what a parked
// connection's client has sent since: peek one byte of the socket below
// any TLS, without blocking. Nothing yet is parkIdle, bytes waiting
// (pipelined or garbage, TLS records included) parkBytes, an end of
// stream or a socket error parkGone.
func probeParked(c net.Conn) parkProbe {
	sc := socketOf(c)
	if sc == nil {
		return parkIdle
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return parkGone
	}
	var (
		b    [1]byte
		n    int
		rerr error
	)
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return parkGone
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) || errors.Is(rerr, syscall.EINTR):
		return parkIdle
	case rerr != nil || n == 0:
		return parkGone
	default:
		return parkBytes
	}
}
