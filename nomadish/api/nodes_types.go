package api

import (
	"strconv"
)

// Node statuses.
const (
	NodeStatusInit  = "initializing"
	NodeStatusReady = "ready"
	NodeStatusDown  = "down"
)

// Node is a client host that runs allocations.
type Node struct {
	ID         string
	Name       string
	Datacenter string
	NodeClass  string
	// HTTPAddr is the client's HTTP address, e.g. "127.0.0.1:4656".
	HTTPAddr string
	// Attributes are fingerprinted facts such as "kernel.name".
	Attributes map[string]string
	Meta       map[string]string
	// Drivers maps driver name to its health.
	Drivers map[string]*DriverInfo

	// NodePool is the node pool the node is in (Nomad's node_pool).
	NodePool string
	// TLSEnabled reports whether the node's HTTP API is HTTPS.
	TLSEnabled bool

	NodeResources     *NodeResources
	ReservedResources *NodeReservedResources
	// MemoryModel is "discrete" or "unified"; Availability "continuous" or
	// "opportunistic"; ReservedCapabilities the capabilities the node is
	// kept for (GPUlayer extensions; Nomad's "Reserved" is its legacy
	// reserved-resources block, not sent).
	MemoryModel          string   `json:",omitempty"`
	Availability         string   `json:",omitempty"`
	ReservedCapabilities []string `json:",omitempty"`

	Status                string
	StatusDescription     string
	SchedulingEligibility string
	// Drain is true while the node is being drained.
	Drain bool
	// StatusUpdatedAt is in Unix seconds.
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

// NodeListStub is one node of GET /v1/nodes: Nomad's list stub, with the
// node's resources and GPUlayer's node classes added.
type NodeListStub struct {
	// Address is the host of the node's HTTP address.
	Address               string
	ID                    string
	Attributes            map[string]string `json:",omitempty"`
	Datacenter            string
	Name                  string
	NodeClass             string
	NodePool              string
	Version               string
	Drain                 bool
	SchedulingEligibility string
	Status                string
	StatusDescription     string
	Drivers               map[string]*DriverInfo
	NodeResources         *NodeResources         `json:",omitempty"`
	ReservedResources     *NodeReservedResources `json:",omitempty"`
	MemoryModel           string                 `json:",omitempty"`
	Availability          string                 `json:",omitempty"`
	ReservedCapabilities  []string               `json:",omitempty"`
	CreateIndex           uint64
	ModifyIndex           uint64
}

// NodeResources is what a node has in total, in Nomad's shape.
type NodeResources struct {
	Cpu     NodeCpuResources
	Memory  NodeMemoryResources
	Devices []*DeviceGroup
	// Networks is the host network (its IP is where services
	// register); MinDynamicPort and MaxDynamicPort bound dynamic ports.
	Networks       []*NetworkResource `json:",omitempty"`
	MinDynamicPort int                `json:",omitempty"`
	MaxDynamicPort int                `json:",omitempty"`
}

// NodeCpuResources is a node's CPU: CpuShares in MHz, all cores together,
// and the number of cores.
type NodeCpuResources struct {
	CpuShares     int64
	TotalCpuCores uint16
}

// NodeMemoryResources is a node's memory in MiB.
type NodeMemoryResources struct {
	MemoryMB int64
}

// NodeReservedResources is kept back for the OS and the agent itself.
type NodeReservedResources struct {
	Cpu      NodeReservedCpuResources
	Memory   NodeReservedMemoryResources
	Networks NodeReservedNetworkResources
}

// NodeReservedNetworkResources lists the host ports kept from
// allocations, "22,80,8000-8080".
type NodeReservedNetworkResources struct {
	ReservedHostPorts string
}

// NodeReservedCpuResources is reserved CPU in MHz.
type NodeReservedCpuResources struct {
	CpuShares uint64
}

// NodeReservedMemoryResources is reserved memory in MiB.
type NodeReservedMemoryResources struct {
	MemoryMB uint64
}

// DeviceGroup is a set of identical devices on one node.
type DeviceGroup struct {
	Vendor string
	Type   string
	// Name is the model, e.g. "NVIDIA H100 80GB HBM3".
	Name string
	// Attributes describe every instance, e.g. "memory" in MiB.
	Attributes map[string]*Attribute
	Instances  []*DeviceInstance
}

// ID returns "vendor/type/name".
func (g *DeviceGroup) ID() string { return g.Vendor + "/" + g.Type + "/" + g.Name }

// DeviceInstance is one schedulable device, named by a stable ID such as an
// NVIDIA UUID.
type DeviceInstance struct {
	ID                string
	Healthy           bool
	HealthDescription string
	// Locality names where the device sits; nil when unknown.
	Locality *NodeDeviceLocality `json:",omitempty"`
}

// NodeDeviceLocality is a device's place on its host: the PCI bus ID.
type NodeDeviceLocality struct {
	PciBusID string
}

// Attribute is a typed value with an optional unit; exactly one of Int,
// Float, String and Bool is set.
type Attribute struct {
	Int    *int64   `json:",omitempty"`
	Float  *float64 `json:",omitempty"`
	String *string  `json:",omitempty"`
	Bool   *bool    `json:",omitempty"`
	Unit   string   `json:",omitempty"`
}

// Text renders the value with its unit, e.g. "81559 MiB".
func (a *Attribute) Text() string {
	if a == nil {
		return "<nil>"
	}
	var v string
	switch {
	case a.Int != nil:
		v = strconv.FormatInt(*a.Int, 10)
	case a.Float != nil:
		v = strconv.FormatFloat(*a.Float, 'f', -1, 64)
	case a.String != nil:
		return *a.String
	case a.Bool != nil:
		return strconv.FormatBool(*a.Bool)
	}
	if a.Unit != "" {
		v += " " + a.Unit
	}
	return v
}
