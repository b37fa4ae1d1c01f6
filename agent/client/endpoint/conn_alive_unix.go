//go:build unix

package endpoint

import (
	"net"
	"syscall"
)

// connAlive reports whether a pooled connection is still open: a
// non-blocking peek finds neither the member's FIN (a member that exited
// or closed the idle connection) nor stray bytes. It never consumes data.
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		rerr := peekNonBlocking(fd, buf[:])
		// EAGAIN: open and nothing pending. No error: the member
		// closed it (0 bytes) or sent bytes nobody asked for.
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
