//go:build !unix

package http

import "net"

// probeParked cannot look at a socket here: a parked connection is
// noticed gone when its wait ends.
func probeParked(net.Conn) parkProbe { return parkIdle }
