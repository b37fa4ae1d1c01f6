package server

import (
	"errors"
	"fmt"
	"net"

	"github.com/gpulayer/gpulayer/structs"
	sockaddr "github.com/hashicorp/go-sockaddr"
)

// errNoPrivateIP is returned when a bind address is unspecified and this
// machine has no private IPv4 address to advertise instead.
var errNoPrivateIP = errors.New("no private IPv4 address to advertise; give an explicit bind address")

// privateIP returns this machine's first private IPv4 address, the one
// Consul and Nomad advertise for a 0.0.0.0 bind (go-sockaddr's
// GetPrivateIP).
func privateIP() (string, error) {
	ip, err := sockaddr.GetPrivateIP()
	if err != nil {
		return "", err
	}
	if ip == "" {
		return "", errNoPrivateIP
	}
	return ip, nil
}

// advertisable returns addr ("host:port") with an unspecified host
// (0.0.0.0, ::, or empty) replaced by ip(), so other servers can dial it;
// other addresses are returned unchanged. It returns an error wrapping
// structs.ErrInvalid for an address that is not host:port.
func advertisable(field, addr string, ip func() (string, error)) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("server: %w: %s %q: %v", structs.ErrInvalid, field, addr, err)
	}
	if host != "" && !net.ParseIP(host).IsUnspecified() {
		return addr, nil
	}
	a, err := ip()
	if err != nil {
		return "", fmt.Errorf("server: %s %q: %w", field, addr, err)
	}
	return net.JoinHostPort(a, port), nil
}

// fillAdvertise sets RaftAdvertiseAddr and rewrites HTTPAddr when their
// bind hosts are unspecified.
func (c *Config) fillAdvertise(ip func() (string, error)) error {
	if c.Transport == nil && c.RaftAdvertiseAddr == "" {
		a, err := advertisable("raft bind address", c.RaftBindAddr, ip)
		if err != nil {
			return err
		}
		if a != c.RaftBindAddr {
			c.RaftAdvertiseAddr = a
		}
	}
	if c.HTTPAddr != "" {
		a, err := advertisable("http address", c.HTTPAddr, ip)
		if err != nil {
			return err
		}
		c.HTTPAddr = a
	}
	return nil
}
