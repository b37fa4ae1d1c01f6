package scheduler

import (
	"fmt"
	"hash/fnv"
	"maps"

	"github.com/gpulayer/gpulayer/structs"
)

// Host ports. A group's network block asks for static ports (a fixed host
// port each) and dynamic ports (any free port of the node's dynamic
// range). A node fits only when every static port is free and enough of
// its dynamic range is; the plan applier checks the same again
// (structs.AllocsFit), so two allocations never share a host port.

// Exhausted dimensions recorded for ports, as Nomad names them.
const (
	dimPortCollision = "network: reserved port collision"
	dimDynamicPorts  = "network: dynamic port selection failed"
)

// portAsk is what a group asks of a node's ports.
type portAsk struct {
	static  []structs.Port
	dynamic []structs.Port
}

func newPortAsk(tg *structs.TaskGroup) portAsk {
	var a portAsk
	for _, n := range tg.Networks {
		if n == nil {
			continue
		}
		a.static = append(a.static, n.ReservedPorts...)
		a.dynamic = append(a.dynamic, n.DynamicPorts...)
	}
	return a
}

func (a portAsk) empty() bool { return len(a.static) == 0 && len(a.dynamic) == 0 }

// portUsage is the host ports in use on one node.
type portUsage struct {
	used map[int]int // host port -> allocations holding it
	// endpoints holds, per host port an endpoint's router holds, the
	// members of each endpoint (structs.EndpointOwner) holding it; every
	// endpoint holding a port counts once in used.
	endpoints map[int]map[string]int
	// lo and hi are the node's dynamic range; inRange counts the used
	// ports within it.
	lo, hi  int
	inRange int
}

// newPortUsage starts with the node's reserved host ports taken.
func newPortUsage(n *structs.Node) portUsage {
	lo, hi := n.DynamicPortRange()
	p := portUsage{lo: lo, hi: hi}
	for _, port := range n.ReservedPorts() {
		p.mark(port, 1)
	}
	return p
}

func (p *portUsage) mark(port int, sign int) {
	if p.used == nil {
		p.used = map[int]int{}
	}
	before := p.used[port]
	after := before + sign
	if after <= 0 {
		delete(p.used, port)
		after = 0
	} else {
		p.used[port] = after
	}
	if port >= p.lo && port <= p.hi {
		switch {
		case before == 0 && after > 0:
			p.inRange++
		case before > 0 && after == 0:
			p.inRange--
		}
	}
}

func (p *portUsage) add(sh *structs.AllocatedSharedResources, sign int) {
	if sh == nil {
		return
	}
	for _, pm := range sh.Ports {
		p.mark(pm.Value, sign)
	}
}

func (p portUsage) clone() portUsage {
	c := p
	c.used = maps.Clone(p.used)
	if p.endpoints != nil {
		c.endpoints = make(map[int]map[string]int, len(p.endpoints))
		for port, m := range p.endpoints {
			c.endpoints[port] = maps.Clone(m)
		}
	}
	return c
}

// dimEndpointPort is the exhausted dimension of a node where an endpoint's
// router port is held by a task port, a reserved port or another endpoint.
const dimEndpointPort = "network: endpoint port collision"

// addEndpoint counts (sign 1) or releases (sign -1) one member of the
// endpoint owner holding host port port. The first member of an endpoint
// marks the port used; the last one to go frees it.
func (p *portUsage) addEndpoint(owner string, port int, sign int) {
	if p.endpoints == nil {
		p.endpoints = map[int]map[string]int{}
	}
	m := p.endpoints[port]
	if m == nil {
		m = map[string]int{}
		p.endpoints[port] = m
	}
	before := m[owner]
	after := before + sign
	switch {
	case after <= 0:
		delete(m, owner)
		if len(m) == 0 {
			delete(p.endpoints, port)
		}
		if before > 0 {
			p.mark(port, -1)
		}
	default:
		m[owner] = after
		if before == 0 {
			p.mark(port, 1)
		}
	}
}

// endpointFits returns the exhausted dimension when the endpoint owner may
// not hold host port port on the node (a task port, a reserved port or
// another endpoint holds it), or "" when it is free or held by owner's own
// members.
func (p *portUsage) endpointFits(owner string, port int) string {
	mine := 0
	if p.endpoints[port][owner] > 0 {
		mine = 1
	}
	if p.used[port] > mine {
		return fmt.Sprintf("%s %d", dimEndpointPort, port)
	}
	return ""
}

// fits returns the exhausted dimension, or "" when the ports fit.
func (p *portUsage) fits(a portAsk) string {
	staticInRange := 0
	for _, s := range a.static {
		if p.used[s.Value] > 0 {
			return fmt.Sprintf("%s %s=%d", dimPortCollision, s.Label, s.Value)
		}
		if s.Value >= p.lo && s.Value <= p.hi {
			staticInRange++
		}
	}
	if len(a.dynamic) > 0 && (p.hi-p.lo+1)-p.inRange-staticInRange < len(a.dynamic) {
		return dimDynamicPorts
	}
	return ""
}

// pick gives the ports of a to one allocation and marks them used: static
// ports as asked, dynamic ones the first free port at or after an offset
// in the range derived from seed (the allocation's name and evaluation),
// so plans of concurrent evaluations seldom pick the same port, while the
// same snapshot and evaluation always pick the same. It returns nil for
// a group without ports.
func (p *portUsage) pick(a portAsk, ip, seed string) (*structs.AllocatedSharedResources, error) {
	if a.empty() {
		return nil, nil
	}
	if dim := p.fits(a); dim != "" {
		return nil, fmt.Errorf("assign ports that do not fit (%s)", dim)
	}
	sh := &structs.AllocatedSharedResources{}
	for _, s := range a.static {
		sh.Ports = append(sh.Ports, structs.AllocatedPortMapping{Label: s.Label, Value: s.Value, To: s.To, HostIP: ip})
		p.mark(s.Value, 1)
	}
	h := fnv.New64a()
	h.Write([]byte(seed))
	span := p.hi - p.lo + 1
	next := p.lo + int(h.Sum64()%uint64(span))
	for _, d := range a.dynamic {
		port := 0
		for i := 0; i < span; i++ {
			c := p.lo + (next-p.lo+i)%span
			if p.used[c] == 0 {
				port = c
				break
			}
		}
		if port == 0 {
			return nil, fmt.Errorf("assign ports: %s", dimDynamicPorts)
		}
		to := d.To
		if to == -1 {
			to = port
		}
		sh.Ports = append(sh.Ports, structs.AllocatedPortMapping{Label: d.Label, Value: port, To: to, HostIP: ip})
		p.mark(port, 1)
		next = port + 1
	}
	return sh, nil
}
