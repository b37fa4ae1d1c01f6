package convert

import (
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// endpointToStructs converts a group's endpoint block; nil stays nil.
func endpointToStructs(e *api.Endpoint) *structs.Endpoint {
	if e == nil {
		return nil
	}
	return &structs.Endpoint{Name: e.Name, Port: e.Port, Model: e.Model, Revision: e.Revision,
		Policy: e.Policy, ModelsPath: e.ModelsPath, MemberPort: e.MemberPort}
}

// endpointFromStructs converts a group's endpoint block back; nil stays nil.
func endpointFromStructs(e *structs.Endpoint) *api.Endpoint {
	if e == nil {
		return nil
	}
	return &api.Endpoint{Name: e.Name, Port: e.Port, Model: e.Model, Revision: e.Revision,
		Policy: e.Policy, ModelsPath: e.ModelsPath, MemberPort: e.MemberPort}
}

// allocatedEndpointRead renders an allocation's endpoint port; nil stays
// nil.
func allocatedEndpointRead(e *structs.AllocatedEndpoint) *api.AllocatedEndpoint {
	if e == nil {
		return nil
	}
	return &api.AllocatedEndpoint{Name: e.Name, Port: e.Port, HostIP: e.HostIP}
}
