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

	NodeResources     *NodeResources
	ReservedResources *NodeReservedResources
	// MemoryModel is "discrete" or "unified"; Availability "continuous" or
	// "opportunistic"; Reserved the capabilities the node is kept for.
	MemoryModel  string   `json:",omitempty"`
	Availability string   `json:",omitempty"`
	Reserved     []string `json:",omitempty"`

	Status                string
	StatusDescription     string
	SchedulingEligibility string
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

// NodeResources is what a node has in total.
type NodeResources struct {
	// CPU is in MHz, all cores together.
	CPU   int64
	Cores int
	// MemoryMB is in MiB.
	MemoryMB int64
	Devices  []*DeviceGroup
}

// NodeReservedResources is kept back for the OS and the agent itself.
type NodeReservedResources struct {
	// CPU is in MHz.
	CPU int64
	// MemoryMB is in MiB.
	MemoryMB int64
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
	// Locality is the PCI bus ID where known.
	Locality string
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
