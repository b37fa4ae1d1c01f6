package structs

import (
	"fmt"
	"strings"
)

// Device vendors and types GPUlayer knows.
const (
	DeviceVendorNvidia = "nvidia"
	DeviceVendorApple  = "apple"
	DeviceTypeGPU      = "gpu"
)

// DeviceGroup is a set of identical devices on one node, such as the eight
// H100s of a DGX box: same vendor, type and model name and attributes.
type DeviceGroup struct {
	Vendor string // "nvidia"
	Type   string // "gpu"
	Name   string // model, e.g. "NVIDIA H100 80GB HBM3"
	// Attributes describe every instance of the group. Well-known keys:
	// "memory" (MiB, Unit "MiB"), "compute_capability" ("9.0"),
	// "driver_version", "cuda_version", "memory_model" ("discrete" |
	// "unified"), "simulated" (bool).
	Attributes map[string]*Attribute
	Instances  []*DeviceInstance
}

// DeviceInstance is one schedulable device, named by a stable ID such as an
// NVIDIA UUID ("GPU-6f1c…") or a MIG UUID ("MIG-…").
type DeviceInstance struct {
	ID                string
	Healthy           bool
	HealthDescription string
	// Locality is the PCI bus ID where known, e.g. "00000000:3B:00.0".
	Locality string
}

// ID returns "vendor/type/name".
func (g *DeviceGroup) ID() string { return g.Vendor + "/" + g.Type + "/" + g.Name }

// Matches reports whether the group satisfies a request name of the form
// "type", "vendor/type" or "vendor/type/name".
func (g *DeviceGroup) Matches(requestName string) bool {
	vendor, typ, name, err := ParseDeviceName(requestName)
	if err != nil {
		return false
	}
	if typ != g.Type {
		return false
	}
	if vendor != "" && vendor != g.Vendor {
		return false
	}
	return name == "" || name == g.Name
}

// HealthyInstances returns the IDs of the group's healthy instances.
func (g *DeviceGroup) HealthyInstances() []string {
	var ids []string
	for _, in := range g.Instances {
		if in != nil && in.Healthy {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// Copy returns a deep copy of the group.
func (g *DeviceGroup) Copy() *DeviceGroup {
	if g == nil {
		return nil
	}
	n := *g
	n.Attributes = make(map[string]*Attribute, len(g.Attributes))
	for k, v := range g.Attributes {
		n.Attributes[k] = v.Copy()
	}
	n.Instances = make([]*DeviceInstance, len(g.Instances))
	for i, in := range g.Instances {
		if in != nil {
			c := *in
			n.Instances[i] = &c
		}
	}
	return &n
}

// ParseDeviceName splits a device request name into vendor, type and model
// name. Accepted forms: "gpu", "nvidia/gpu", "nvidia/gpu/NVIDIA H100 80GB HBM3".
// The model may itself hold no further slash-separated parts beyond the third.
func ParseDeviceName(s string) (vendor, typ, name string, err error) {
	if strings.TrimSpace(s) == "" {
		return "", "", "", fmt.Errorf("device name is empty; want \"vendor/type[/model]\" such as \"nvidia/gpu\"")
	}
	parts := strings.SplitN(s, "/", 3)
	for _, p := range parts {
		if p == "" {
			return "", "", "", fmt.Errorf("device name %q has an empty part; want \"vendor/type[/model]\"", s)
		}
	}
	switch len(parts) {
	case 1:
		return "", parts[0], "", nil
	case 2:
		return parts[0], parts[1], "", nil
	default:
		return parts[0], parts[1], parts[2], nil
	}
}

// AllocatedDeviceResource names the exact device instances an allocation's
// task holds from one device group.
type AllocatedDeviceResource struct {
	Vendor    string
	Type      string
	Name      string
	DeviceIDs []string
	// MemoryMB is the share of the one instance in DeviceIDs, in MiB, when
	// the task asked for a memory share; zero means whole devices.
	MemoryMB int64 `json:",omitempty"`
}

// ID returns "vendor/type/name".
func (d *AllocatedDeviceResource) ID() string { return d.Vendor + "/" + d.Type + "/" + d.Name }

// Copy returns a deep copy.
func (d *AllocatedDeviceResource) Copy() *AllocatedDeviceResource {
	if d == nil {
		return nil
	}
	n := *d
	n.DeviceIDs = append([]string(nil), d.DeviceIDs...)
	return &n
}
