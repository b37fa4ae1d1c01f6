package structs

import "fmt"

// AllocatedEndpoint is the router port an endpoint member's allocation
// holds on its node. All members of one endpoint (same namespace, job and
// group) hold the same host port and share it; no other allocation of the
// node may hold it, as an endpoint port or as a task port (AllocsFit).
type AllocatedEndpoint struct {
	// Name is the endpoint's name (Endpoint.Name).
	Name string
	// Port is the host TCP port the node's router listens on.
	Port int
	// HostIP is the node address the port is on.
	HostIP string `json:",omitempty"`
}

// Copy returns a copy.
func (e *AllocatedEndpoint) Copy() *AllocatedEndpoint {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}

// EndpointOwner returns the key the members of a's endpoint share
// ("namespace/job/group"): two allocations with an endpoint port may hold
// the same host port only when their owners are equal.
func EndpointOwner(a *Allocation) string {
	return a.Namespace + "/" + a.JobID + "/" + a.TaskGroup
}

// portHolder is who holds a host port on a node while AllocsFit checks it:
// one allocation's task port (owner empty) or the members of one endpoint.
type portHolder struct {
	alloc string
	owner string
	name  string
}

// claimEndpointPort records that a holds ep on the node whose host ports
// are ports, and returns why it may not, or "". Members of one endpoint
// share the port; a task port or another endpoint on it is a collision.
func claimEndpointPort(ports map[int]portHolder, reserved map[int]bool, a *Allocation, ep *AllocatedEndpoint) string {
	if a.CreateIndex == 0 && (ep.Port < 1 || ep.Port > MaxValidPort) {
		return fmt.Sprintf("endpoint %q: host port %d is out of range", ep.Name, ep.Port)
	}
	if a.CreateIndex == 0 && reserved[ep.Port] {
		return fmt.Sprintf("endpoint %q: host port %d is reserved on the node", ep.Name, ep.Port)
	}
	owner := EndpointOwner(a)
	if prev, dup := ports[ep.Port]; dup {
		switch {
		case prev.owner == owner:
			return ""
		case prev.owner == "":
			return fmt.Sprintf("port %d: endpoint %q of alloc %s collides with a port of alloc %s", ep.Port, ep.Name, ShortID(a.ID), ShortID(prev.alloc))
		default:
			return fmt.Sprintf("port %d: held by endpoint %q (alloc %s), also asked by endpoint %q (alloc %s)", ep.Port, prev.name, ShortID(prev.alloc), ep.Name, ShortID(a.ID))
		}
	}
	ports[ep.Port] = portHolder{alloc: a.ID, owner: owner, name: ep.Name}
	return ""
}
