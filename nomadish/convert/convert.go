// Package convert translates jobs between the wire types of nomadish/api and
// the domain types of structs. The two have the same shapes; the conversion
// is explicit, field by field, so that a field added to one side without the
// other fails to compile here or in the round-trip test instead of being
// dropped silently. Results share no maps or slices with their input: driver
// Config values are copied deeply.
package convert

import (
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// JobToStructs converts a wire job to the domain job, read-only fields
// (Status, Version, Raft indexes...) included. It returns nil for nil.
// Nil slices and maps stay nil and nil elements stay nil; it does not fill
// defaults or validate (see structs.Job.Canonicalize and Validate).
func JobToStructs(j *api.Job) *structs.Job {
	if j == nil {
		return nil
	}
	out := &structs.Job{
		ID:                j.ID,
		Name:              j.Name,
		Namespace:         j.Namespace,
		NodePool:          j.NodePool,
		Type:              j.Type,
		Priority:          j.Priority,
		Datacenters:       cloneStrings(j.Datacenters),
		Meta:              cloneStringMap(j.Meta),
		Constraints:       constraintsToStructs(j.Constraints),
		Affinities:        affinitiesToStructs(j.Affinities),
		Requires:          cloneStrings(j.Requires),
		Availability:      j.Availability,
		Stop:              j.Stop,
		Status:            j.Status,
		StatusDescription: j.StatusDescription,
		Version:           j.Version,
		Stable:            j.Stable,
		SubmitTime:        j.SubmitTime,
		CreateIndex:       j.CreateIndex,
		ModifyIndex:       j.ModifyIndex,
		JobModifyIndex:    j.JobModifyIndex,
		// Periodic and parameterized jobs.
		MaxRunningChildren:       j.MaxRunningChildren,
		ParentID:                 j.ParentID,
		Dispatched:               j.Dispatched,
		Payload:                  cloneBytes(j.Payload),
		DispatchIdempotencyToken: j.DispatchIdempotencyToken,
		Held:                     j.Held,
	}
	if p := j.Periodic; p != nil {
		out.Periodic = &structs.PeriodicConfig{Enabled: p.Enabled == nil || *p.Enabled, Spec: p.Spec, Specs: cloneStrings(p.Specs), SpecType: p.SpecType,
			ProhibitOverlap: p.ProhibitOverlap, TimeZone: p.TimeZone}
	}
	if p := j.ParameterizedJob; p != nil {
		out.ParameterizedJob = &structs.ParameterizedJobConfig{Payload: p.Payload, MetaRequired: cloneStrings(p.MetaRequired),
			MetaOptional: cloneStrings(p.MetaOptional)}
	}
	if j.TaskGroups != nil {
		out.TaskGroups = make([]*structs.TaskGroup, len(j.TaskGroups))
		for i, tg := range j.TaskGroups {
			out.TaskGroups[i] = taskGroupToStructs(tg)
		}
	}
	out.Update = updateToStructs(j.Update)
	return out
}

// JobFromStructs converts a domain job to its wire form, read-only fields
// included. It returns nil for nil. Nil slices and maps stay nil.
func JobFromStructs(j *structs.Job) *api.Job {
	if j == nil {
		return nil
	}
	out := &api.Job{
		ID:                j.ID,
		Name:              j.Name,
		Namespace:         j.Namespace,
		NodePool:          j.NodePool,
		Type:              j.Type,
		Priority:          j.Priority,
		Datacenters:       cloneStrings(j.Datacenters),
		Meta:              cloneStringMap(j.Meta),
		Constraints:       constraintsFromStructs(j.Constraints),
		Affinities:        affinitiesFromStructs(j.Affinities),
		Requires:          cloneStrings(j.Requires),
		Availability:      j.Availability,
		Stop:              j.Stop,
		Status:            j.Status,
		StatusDescription: j.StatusDescription,
		Version:           j.Version,
		Stable:            j.Stable,
		SubmitTime:        j.SubmitTime,
		CreateIndex:       j.CreateIndex,
		ModifyIndex:       j.ModifyIndex,
		JobModifyIndex:    j.JobModifyIndex,
		// Periodic and parameterized jobs.
		MaxRunningChildren:       j.MaxRunningChildren,
		ParentID:                 j.ParentID,
		Dispatched:               j.Dispatched,
		Payload:                  cloneBytes(j.Payload),
		DispatchIdempotencyToken: j.DispatchIdempotencyToken,
		Held:                     j.Held,
	}
	if p := j.Periodic; p != nil {
		enabled := p.Enabled
		out.Periodic = &api.PeriodicConfig{Enabled: &enabled, Spec: p.Spec, Specs: cloneStrings(p.Specs), SpecType: p.SpecType,
			ProhibitOverlap: p.ProhibitOverlap, TimeZone: p.TimeZone}
	}
	if p := j.ParameterizedJob; p != nil {
		out.ParameterizedJob = &api.ParameterizedJobConfig{Payload: p.Payload, MetaRequired: cloneStrings(p.MetaRequired),
			MetaOptional: cloneStrings(p.MetaOptional)}
	}
	if j.TaskGroups != nil {
		out.TaskGroups = make([]*api.TaskGroup, len(j.TaskGroups))
		for i, tg := range j.TaskGroups {
			out.TaskGroups[i] = taskGroupFromStructs(tg)
		}
	}
	out.Update = updateFromStructs(j.Update)
	return out
}

func taskGroupToStructs(tg *api.TaskGroup) *structs.TaskGroup {
	if tg == nil {
		return nil
	}
	out := &structs.TaskGroup{
		Name:         tg.Name,
		Count:        tg.Count,
		Constraints:  constraintsToStructs(tg.Constraints),
		Affinities:   affinitiesToStructs(tg.Affinities),
		Meta:         cloneStringMap(tg.Meta),
		Gang:         tg.Gang,
		Requires:     cloneStrings(tg.Requires),
		Availability: tg.Availability,
		Networks:     networksToStructs(tg.Networks),
		Services:     servicesToStructs(tg.Services),
	}
	out.MaxRunDuration = tg.MaxRunDuration
	out.ShutdownDelay = tg.ShutdownDelay
	if rs := tg.ReschedulePolicy; rs != nil {
		out.ReschedulePolicy = &structs.ReschedulePolicy{Attempts: rs.Attempts, Interval: rs.Interval, Unlimited: rs.Unlimited, Delay: rs.Delay,
			DelayFunction: rs.DelayFunction, MaxDelay: rs.MaxDelay}
	}
	if rp := tg.RestartPolicy; rp != nil {
		out.RestartPolicy = &structs.RestartPolicy{
			Attempts: rp.Attempts,
			Interval: rp.Interval,
			Delay:    rp.Delay,
			Mode:     rp.Mode,
		}
	}
	if tg.Tasks != nil {
		out.Tasks = make([]*structs.Task, len(tg.Tasks))
		for i, t := range tg.Tasks {
			out.Tasks[i] = taskToStructs(t)
		}
	}
	out.Update = updateToStructs(tg.Update)
	out.Endpoint = endpointToStructs(tg.Endpoint)
	return out
}

func taskGroupFromStructs(tg *structs.TaskGroup) *api.TaskGroup {
	if tg == nil {
		return nil
	}
	out := &api.TaskGroup{
		Name:         tg.Name,
		Count:        tg.Count,
		Constraints:  constraintsFromStructs(tg.Constraints),
		Affinities:   affinitiesFromStructs(tg.Affinities),
		Meta:         cloneStringMap(tg.Meta),
		Gang:         tg.Gang,
		Requires:     cloneStrings(tg.Requires),
		Availability: tg.Availability,
		Networks:     networksFromStructs(tg.Networks),
		Services:     servicesFromStructs(tg.Services),
	}
	out.MaxRunDuration = tg.MaxRunDuration
	out.ShutdownDelay = tg.ShutdownDelay
	if rs := tg.ReschedulePolicy; rs != nil {
		out.ReschedulePolicy = &api.ReschedulePolicy{Attempts: rs.Attempts, Interval: rs.Interval, Unlimited: rs.Unlimited, Delay: rs.Delay,
			DelayFunction: rs.DelayFunction, MaxDelay: rs.MaxDelay}
	}
	if rp := tg.RestartPolicy; rp != nil {
		out.RestartPolicy = &api.RestartPolicy{
			Attempts: rp.Attempts,
			Interval: rp.Interval,
			Delay:    rp.Delay,
			Mode:     rp.Mode,
		}
	}
	if tg.Tasks != nil {
		out.Tasks = make([]*api.Task, len(tg.Tasks))
		for i, t := range tg.Tasks {
			out.Tasks[i] = taskFromStructs(t)
		}
	}
	out.Update = updateFromStructs(tg.Update)
	out.Endpoint = endpointFromStructs(tg.Endpoint)
	return out
}

func taskToStructs(t *api.Task) *structs.Task {
	if t == nil {
		return nil
	}
	out := &structs.Task{
		Name:        t.Name,
		Driver:      t.Driver,
		Config:      cloneConfig(t.Config),
		Env:         cloneStringMap(t.Env),
		Resources:   resourcesToStructs(t.Resources),
		Constraints: constraintsToStructs(t.Constraints),
		Affinities:  affinitiesToStructs(t.Affinities),
		Meta:        cloneStringMap(t.Meta),
		KillTimeout: t.KillTimeout,
		KillSignal:  t.KillSignal,
		User:        t.User,
		Artifacts:   artifactsToStructs(t.Artifacts),
		Services:    servicesToStructs(t.Services),
	}
	if dp := t.DispatchPayload; dp != nil {
		out.DispatchPayload = &structs.DispatchPayloadConfig{File: dp.File}
	}
	out.MaxRunDuration = t.MaxRunDuration
	out.ShutdownDelay = t.ShutdownDelay
	return out
}

func taskFromStructs(t *structs.Task) *api.Task {
	if t == nil {
		return nil
	}
	out := &api.Task{
		Name:        t.Name,
		Driver:      t.Driver,
		Config:      cloneConfig(t.Config),
		Env:         cloneStringMap(t.Env),
		Resources:   resourcesFromStructs(t.Resources),
		Constraints: constraintsFromStructs(t.Constraints),
		Affinities:  affinitiesFromStructs(t.Affinities),
		Meta:        cloneStringMap(t.Meta),
		KillTimeout: t.KillTimeout,
		KillSignal:  t.KillSignal,
		User:        t.User,
		Artifacts:   artifactsFromStructs(t.Artifacts),
		Services:    servicesFromStructs(t.Services),
	}
	if dp := t.DispatchPayload; dp != nil {
		out.DispatchPayload = &api.DispatchPayloadConfig{File: dp.File}
	}
	out.MaxRunDuration = t.MaxRunDuration
	out.ShutdownDelay = t.ShutdownDelay
	return out
}

func artifactsToStructs(as []*api.TaskArtifact) []*structs.TaskArtifact {
	if as == nil {
		return nil
	}
	out := make([]*structs.TaskArtifact, len(as))
	for i, a := range as {
		if a == nil {
			continue
		}
		out[i] = &structs.TaskArtifact{
			GetterSource: a.GetterSource, GetterOptions: cloneStringMap(a.GetterOptions),
			GetterMode: a.GetterMode, RelativeDest: a.RelativeDest, Checksum: a.Checksum,
		}
	}
	return out
}

func artifactsFromStructs(as []*structs.TaskArtifact) []*api.TaskArtifact {
	if as == nil {
		return nil
	}
	out := make([]*api.TaskArtifact, len(as))
	for i, a := range as {
		if a == nil {
			continue
		}
		out[i] = &api.TaskArtifact{
			GetterSource: a.GetterSource, GetterOptions: cloneStringMap(a.GetterOptions),
			GetterMode: a.GetterMode, RelativeDest: a.RelativeDest, Checksum: a.Checksum,
		}
	}
	return out
}

func resourcesToStructs(r *api.Resources) *structs.Resources {
	if r == nil {
		return nil
	}
	out := &structs.Resources{CPU: r.CPU, MemoryMB: r.MemoryMB}
	if r.Devices != nil {
		out.Devices = make([]*structs.RequestedDevice, len(r.Devices))
		for i, d := range r.Devices {
			if d == nil {
				continue
			}
			out.Devices[i] = &structs.RequestedDevice{
				Name:        d.Name,
				Count:       d.Count,
				MemoryMB:    d.MemoryMB,
				Constraints: constraintsToStructs(d.Constraints),
				Affinities:  affinitiesToStructs(d.Affinities),
			}
		}
	}
	return out
}

func resourcesFromStructs(r *structs.Resources) *api.Resources {
	if r == nil {
		return nil
	}
	out := &api.Resources{CPU: r.CPU, MemoryMB: r.MemoryMB}
	if r.Devices != nil {
		out.Devices = make([]*api.RequestedDevice, len(r.Devices))
		for i, d := range r.Devices {
			if d == nil {
				continue
			}
			out.Devices[i] = &api.RequestedDevice{
				Name:        d.Name,
				Count:       d.Count,
				MemoryMB:    d.MemoryMB,
				Constraints: constraintsFromStructs(d.Constraints),
				Affinities:  affinitiesFromStructs(d.Affinities),
			}
		}
	}
	return out
}

func constraintsToStructs(cs []*api.Constraint) []*structs.Constraint {
	if cs == nil {
		return nil
	}
	out := make([]*structs.Constraint, len(cs))
	for i, c := range cs {
		if c != nil {
			out[i] = &structs.Constraint{LTarget: c.LTarget, RTarget: c.RTarget, Operand: c.Operand}
		}
	}
	return out
}

func constraintsFromStructs(cs []*structs.Constraint) []*api.Constraint {
	if cs == nil {
		return nil
	}
	out := make([]*api.Constraint, len(cs))
	for i, c := range cs {
		if c != nil {
			out[i] = &api.Constraint{LTarget: c.LTarget, RTarget: c.RTarget, Operand: c.Operand}
		}
	}
	return out
}

func affinitiesToStructs(as []*api.Affinity) []*structs.Affinity {
	if as == nil {
		return nil
	}
	out := make([]*structs.Affinity, len(as))
	for i, a := range as {
		if a != nil {
			out[i] = &structs.Affinity{LTarget: a.LTarget, RTarget: a.RTarget, Operand: a.Operand, Weight: a.Weight}
		}
	}
	return out
}

func affinitiesFromStructs(as []*structs.Affinity) []*api.Affinity {
	if as == nil {
		return nil
	}
	out := make([]*api.Affinity, len(as))
	for i, a := range as {
		if a != nil {
			out[i] = &api.Affinity{LTarget: a.LTarget, RTarget: a.RTarget, Operand: a.Operand, Weight: a.Weight}
		}
	}
	return out
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append(make([]string, 0, len(s)), s...)
}

func cloneStringMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cloneConfig copies a driver config deeply: nested map[string]interface{}
// and []interface{} values are copied too; other values (strings, numbers,
// booleans) are immutable and shared.
func cloneConfig(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return nil
	}
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v interface{}) interface{} {
	switch v := v.(type) {
	case map[string]interface{}:
		return cloneConfig(v)
	case []interface{}:
		if v == nil {
			return v
		}
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	default:
		return v
	}
}
