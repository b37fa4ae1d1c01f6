//go:build !unix

package endpoint

import "net"

// connAlive cannot peek a socket here; a pooled connection the member
// closed then fails its request with a 502 rather than being replayed.
func connAlive(net.Conn) bool { return true }
