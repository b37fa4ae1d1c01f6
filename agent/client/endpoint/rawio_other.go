//go:build !linux

package endpoint

import (
	"net"
	"syscall"
)

// rawConn is Linux only; elsewhere connections keep net's own I/O.
type rawConn struct{ net.Conn }

// fastConn returns c: raw-syscall I/O is Linux only.
func fastConn(c net.Conn) net.Conn { return c }

// peekNonBlocking peeks one byte of the socket fd without blocking and
// returns the errno (0: a byte or the peer's close).
func peekNonBlocking(fd uintptr, buf []byte) syscall.Errno {
	_, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return 0
}
