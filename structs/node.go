package structs

import (
	"fmt"
	"maps"
	"slices"
)

// Node statuses.
const (
	NodeStatusInit  = "initializing"
	NodeStatusReady = "ready"
	NodeStatusDown  = "down"
)

// Node scheduling eligibility.
const (
	NodeSchedulingEligible   = "eligible"
	NodeSchedulingIneligible = "ineligible"
)

// Node memory models and availability classes.
const (
	MemoryModelDiscrete       = "discrete"
	MemoryModelUnified        = "unified"
	AvailabilityContinuous    = "continuous"
	AvailabilityOpportunistic = "opportunistic"
)

// Node is a client host that runs allocations.
type Node struct {
	ID string
	// SecretID authenticates the node's client to the servers. It is
	// never sent in JSON (API answers); Raft entries and snapshots carry it
	// (codec tag) so every server can check it.
	SecretID   string `json:"-" codec:"SecretID"`
	Name       string
	Datacenter string
	NodeClass  string
	// HTTPAddr is the client's HTTP address ("127.0.0.1:4656") used by
	// servers to proxy log reads.
	HTTPAddr string
	// Attributes are fingerprinted facts: "kernel.name" = "linux",
	// "cpu.arch", "cpu.numcores", "os.name", "driver.native" = "1",
	// "unique.hostname", "memory_model", "availability".
	Attributes map[string]string
	Meta       map[string]string
	// Drivers maps driver name to its health, e.g. "native".
	Drivers map[string]*DriverInfo

	NodeResources     *NodeResources
	ReservedResources *NodeReservedResources

	// MemoryModel is MemoryModelDiscrete (GPUs have their own memory; the
	// default when empty) or MemoryModelUnified (GPU memory is carved from
	// host memory, as on Apple Silicon).
	MemoryModel string
	// Availability is AvailabilityContinuous (the default when empty) or
	// AvailabilityOpportunistic (the node may go away; it takes only groups
	// that opt in).
	Availability string
	// NodePool is the node pool the node belongs to (Nomad's node_pool);
	// empty means NodePoolDefault.
	NodePool string `json:",omitempty"`
	// Reserved lists capabilities the node is kept for, such as "voice":
	// it takes only groups that require one of them.
	Reserved []string

	Status                string
	StatusDescription     string
	SchedulingEligibility string
	// DrainStrategy is set while the node drains (see DrainStrategy).
	DrainStrategy *DrainStrategy `json:",omitempty"`
	// StatusUpdatedAt is in Unix seconds, set by the endpoint.
	StatusUpdatedAt int64
	CreateIndex     uint64
	ModifyIndex     uint64
}

// DriverInfo is a driver's fingerprint on a node.
type DriverInfo struct {
	Detected          bool
	Healthy           bool
	HealthDescription string
	Attributes        map[string]string
}

// NodeResources is what a node has in total.
type NodeResources struct {
	CPU      int64 // MHz, all cores together
	Cores    int
	MemoryMB int64 // MiB
	Devices  []*DeviceGroup
	// Networks describe the host network; the first one's IP is the
	// address services register with (Node.HostIP).
	Networks []*NetworkResource `json:",omitempty"`
	// MinDynamicPort and MaxDynamicPort bound the host ports given to
	// dynamic ports; zero means DefaultMinDynamicPort and
	// DefaultMaxDynamicPort.
	MinDynamicPort int `json:",omitempty"`
	MaxDynamicPort int `json:",omitempty"`
}

// NodeReservedResources is kept back for the OS and the agent itself.
type NodeReservedResources struct {
	CPU      int64 // MHz
	MemoryMB int64 // MiB
	// Networks holds the host ports kept from allocations (Nomad's
	// shape).
	Networks NodeReservedNetworkResources
}

// NodeReservedNetworkResources is the reserved part of the host network.
type NodeReservedNetworkResources struct {
	// ReservedHostPorts lists ports and ranges, "22,80,8000-8080"
	// (structs.ParsePortRanges).
	ReservedHostPorts string `json:",omitempty"`
}

// Ready reports whether the node can take new allocations.
func (n *Node) Ready() bool {
	return n.Status == NodeStatusReady && n.SchedulingEligibility != NodeSchedulingIneligible
}

// NotReadyReason returns why the node cannot take new allocations, naming
// what is true of it, or "" when it is Ready. Its status comes first: "node
// down", "node initializing" (or "node status \"x\"" for any other status);
// a ready node that is ineligible says "node ineligible (draining)" while a
// drain is set and "node ineligible" otherwise. The scheduler records it in
// AllocMetric.ConstraintFiltered and the plan applier in its refusals, so
// `job status`, `job plan` and the evaluation say the same as `node status`.
func (n *Node) NotReadyReason() string {
	switch {
	case n.Status == NodeStatusDown:
		return "node down"
	case n.Status == NodeStatusInit:
		return "node initializing"
	case n.Status != NodeStatusReady:
		return fmt.Sprintf("node status %q", n.Status)
	case n.SchedulingEligibility == NodeSchedulingIneligible && n.DrainStrategy != nil:
		return "node ineligible (draining)"
	case n.SchedulingEligibility == NodeSchedulingIneligible:
		return "node ineligible"
	}
	return ""
}

// Copy returns a deep copy of the node.
func (n *Node) Copy() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Attributes = maps.Clone(n.Attributes)
	c.Meta = maps.Clone(n.Meta)
	c.Reserved = slices.Clone(n.Reserved)
	if n.Drivers != nil {
		c.Drivers = make(map[string]*DriverInfo, len(n.Drivers))
		for k, d := range n.Drivers {
			if d == nil {
				c.Drivers[k] = nil
				continue
			}
			dc := *d
			dc.Attributes = maps.Clone(d.Attributes)
			c.Drivers[k] = &dc
		}
	}
	if n.NodeResources != nil {
		r := *n.NodeResources
		r.Devices = make([]*DeviceGroup, len(n.NodeResources.Devices))
		for i, g := range n.NodeResources.Devices {
			r.Devices[i] = g.Copy()
		}
		r.Networks = copyNetworks(n.NodeResources.Networks)
		c.NodeResources = &r
	}
	if n.ReservedResources != nil {
		r := *n.ReservedResources
		c.ReservedResources = &r
	}
	if n.DrainStrategy != nil {
		d := *n.DrainStrategy
		c.DrainStrategy = &d
	}
	return &c
}

// Stub returns the node without its secret, for listing.
func (n *Node) Stub() *Node {
	c := n.Copy()
	c.SecretID = ""
	return c
}
