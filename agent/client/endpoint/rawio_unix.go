//go:build linux

package endpoint

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawConn reads and writes a non-blocking socket with raw system calls:
// the socket never blocks (the poller waits for readiness), so the Go
// runtime's bookkeeping for a blocking system call is not needed, and
// skipping it spares the wake-up of the runtime's monitor thread that
// each such call makes on an otherwise idle process (one or two thread
// switches a request, on a proxy that answers in microseconds).
type rawConn struct {
	net.Conn
	rc syscall.RawConn
}

// fastConn returns c with raw-syscall I/O where c is a TCP connection
// (possibly inside a limitConn), else c itself.
func fastConn(c net.Conn) net.Conn {
	sc, ok := unwrapConn(c).(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &rawConn{Conn: c, rc: rc}
}

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until readable
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawConn) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written))
			switch e {
			case 0:
				written += int(r)
				continue
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until writable
			}
			errno = e
			return true
		}
		return true
	})
	switch {
	case err != nil:
		return written, err
	case errno != 0:
		return written, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return written, nil
}

// peekNonBlocking peeks one byte of the socket fd without blocking and
// returns the errno (0: a byte or the peer's close), as a raw system call
// (see rawConn).
func peekNonBlocking(fd uintptr, buf []byte) syscall.Errno {
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e
}
