package convert

import (
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

func portsToStructs(ps []api.Port) []structs.Port {
	if ps == nil {
		return nil
	}
	out := make([]structs.Port, len(ps))
	for i, p := range ps {
		out[i] = structs.Port{Label: p.Label, Value: p.Value, To: p.To, HostNetwork: p.HostNetwork}
	}
	return out
}

func portsFromStructs(ps []structs.Port) []api.Port {
	if ps == nil {
		return nil
	}
	out := make([]api.Port, len(ps))
	for i, p := range ps {
		out[i] = api.Port{Label: p.Label, Value: p.Value, To: p.To, HostNetwork: p.HostNetwork}
	}
	return out
}

func networksToStructs(ns []*api.NetworkResource) []*structs.NetworkResource {
	if ns == nil {
		return nil
	}
	out := make([]*structs.NetworkResource, len(ns))
	for i, n := range ns {
		if n != nil {
			out[i] = &structs.NetworkResource{Mode: n.Mode, IP: n.IP, ReservedPorts: portsToStructs(n.ReservedPorts), DynamicPorts: portsToStructs(n.DynamicPorts)}
		}
	}
	return out
}

func networksFromStructs(ns []*structs.NetworkResource) []*api.NetworkResource {
	if ns == nil {
		return nil
	}
	out := make([]*api.NetworkResource, len(ns))
	for i, n := range ns {
		if n != nil {
			out[i] = &api.NetworkResource{Mode: n.Mode, IP: n.IP, ReservedPorts: portsFromStructs(n.ReservedPorts), DynamicPorts: portsFromStructs(n.DynamicPorts)}
		}
	}
	return out
}

func servicesToStructs(ss []*api.Service) []*structs.Service {
	if ss == nil {
		return nil
	}
	out := make([]*structs.Service, len(ss))
	for i, s := range ss {
		if s == nil {
			continue
		}
		c := &structs.Service{Name: s.Name, TaskName: s.TaskName, PortLabel: s.PortLabel, Tags: cloneStrings(s.Tags), Provider: s.Provider}
		if s.Checks != nil {
			c.Checks = make([]*structs.ServiceCheck, len(s.Checks))
			for j, ch := range s.Checks {
				if ch != nil {
					c.Checks[j] = &structs.ServiceCheck{Name: ch.Name, Type: ch.Type, Path: ch.Path, PortLabel: ch.PortLabel, Command: ch.Command,
						Args: cloneStrings(ch.Args), TaskName: ch.TaskName, Interval: ch.Interval, Timeout: ch.Timeout}
				}
			}
		}
		out[i] = c
	}
	return out
}

func servicesFromStructs(ss []*structs.Service) []*api.Service {
	if ss == nil {
		return nil
	}
	out := make([]*api.Service, len(ss))
	for i, s := range ss {
		if s == nil {
			continue
		}
		c := &api.Service{Name: s.Name, TaskName: s.TaskName, PortLabel: s.PortLabel, Tags: cloneStrings(s.Tags), Provider: s.Provider}
		if s.Checks != nil {
			c.Checks = make([]*api.ServiceCheck, len(s.Checks))
			for j, ch := range s.Checks {
				if ch != nil {
					c.Checks[j] = &api.ServiceCheck{Name: ch.Name, Type: ch.Type, Path: ch.Path, PortLabel: ch.PortLabel, Command: ch.Command,
						Args: cloneStrings(ch.Args), TaskName: ch.TaskName, Interval: ch.Interval, Timeout: ch.Timeout}
				}
			}
		}
		out[i] = c
	}
	return out
}

// ServiceRegistrationFromStructs renders a registration in its wire
// form; nil for nil.
func ServiceRegistrationFromStructs(r *structs.ServiceRegistration) *api.ServiceRegistration {
	if r == nil {
		return nil
	}
	return &api.ServiceRegistration{
		ID: r.ID, ServiceName: r.ServiceName, Namespace: r.Namespace, NodeID: r.NodeID, Datacenter: r.Datacenter,
		JobID: r.JobID, AllocID: r.AllocID, Tags: cloneStrings(r.Tags), Address: r.Address, Port: r.Port,
		CreateIndex: r.CreateIndex, ModifyIndex: r.ModifyIndex,
	}
}

// ServiceRegistrationsFromStructs renders a list; never nil.
func ServiceRegistrationsFromStructs(rs []*structs.ServiceRegistration) []*api.ServiceRegistration {
	out := make([]*api.ServiceRegistration, 0, len(rs))
	for _, r := range rs {
		if r != nil {
			out = append(out, ServiceRegistrationFromStructs(r))
		}
	}
	return out
}

// ServiceStubsFromStructs groups registrations (sorted by namespace and
// name, as the server returns them) into Nomad's list shape: one stub per
// namespace, one entry per service with the union of its tags in first
// seen order. Never nil.
func ServiceStubsFromStructs(rs []*structs.ServiceRegistration) []*api.ServiceRegistrationListStub {
	out := []*api.ServiceRegistrationListStub{}
	var cur *api.ServiceRegistrationListStub
	var svc *api.ServiceRegistrationStub
	var seen map[string]bool
	for _, r := range rs {
		if r == nil {
			continue
		}
		if cur == nil || cur.Namespace != r.Namespace {
			cur = &api.ServiceRegistrationListStub{Namespace: r.Namespace}
			out = append(out, cur)
			svc = nil
		}
		if svc == nil || svc.ServiceName != r.ServiceName {
			svc = &api.ServiceRegistrationStub{ServiceName: r.ServiceName, Tags: []string{}}
			cur.Services = append(cur.Services, svc)
			seen = map[string]bool{}
		}
		for _, t := range r.Tags {
			if !seen[t] {
				seen[t] = true
				svc.Tags = append(svc.Tags, t)
			}
		}
	}
	return out
}

// CheckStatusesFromStructs renders a client's check results by check ID;
// never nil.
func CheckStatusesFromStructs(m map[string]*structs.CheckStatus) map[string]*api.CheckQueryResult {
	out := make(map[string]*api.CheckQueryResult, len(m))
	for id, c := range m {
		if c == nil {
			continue
		}
		out[id] = &api.CheckQueryResult{ID: c.ID, Mode: c.Mode, Status: c.Status, StatusCode: c.StatusCode, Output: c.Output,
			Timestamp: c.Timestamp, Group: c.Group, Task: c.Task, Service: c.Service, Check: c.Check}
	}
	return out
}
