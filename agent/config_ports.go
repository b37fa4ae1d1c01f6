package agent

import (
	"fmt"
	"strconv"

	"github.com/gpulayer/gpulayer/structs"
)

// validatePorts lists what is wrong with the client's dynamic port range
// (`client { min_dynamic_port max_dynamic_port }`, as in Nomad): each 0
// (the default, 20000 and 32000) or 1024-65535, the minimum below the
// maximum once defaults are filled; and with reserved_ports
// ("22,80,8000-8080").
func (c *ClientConfig) validatePorts() []string {
	var p []string
	for _, f := range []struct {
		name string
		v    int
	}{{"min_dynamic_port", c.MinDynamicPort}, {"max_dynamic_port", c.MaxDynamicPort}} {
		if f.v != 0 && (f.v < 1024 || f.v > structs.MaxValidPort) {
			p = append(p, fmt.Sprintf("client.%s: must be 0 (the default) or between 1024 and %d, got %d", f.name, structs.MaxValidPort, f.v))
		}
	}
	lo, hi := c.MinDynamicPort, c.MaxDynamicPort
	if lo == 0 {
		lo = structs.DefaultMinDynamicPort
	}
	if hi == 0 {
		hi = structs.DefaultMaxDynamicPort
	}
	if _, err := structs.ParsePortRanges(c.ReservedPorts); err != nil {
		p = append(p, fmt.Sprintf("client.reserved_ports: %v", err))
	}
	if len(p) == 0 && lo > hi {
		p = append(p, fmt.Sprintf("client.min_dynamic_port (%d) must not be above client.max_dynamic_port (%d)", lo, hi))
	}
	return p
}

// clientReservedPorts is the reserved_ports spec the client is given: the
// operator's, plus the ports this agent listens on (http always, raft and
// serf when the server runs), so the scheduler never gives a task's static
// or dynamic port the agent holds (the task failed to bind, or a docker
// mapping took the agent's port when the agent restarted).
func (c *Config) clientReservedPorts() string {
	spec := c.Client.ReservedPorts
	add := func(port int) {
		if port <= 0 || port > structs.MaxValidPort {
			return
		}
		if spec != "" {
			spec += ","
		}
		spec += strconv.Itoa(port)
	}
	if c.Ports != nil {
		add(c.Ports.HTTP)
		if c.Server != nil && c.Server.Enabled {
			add(c.Ports.Raft)
			add(c.Ports.Serf)
		}
	}
	return spec
}
