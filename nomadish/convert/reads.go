package convert

import (
	"encoding/json"
	"net"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// Defaults a read fills where the domain type has no value, as Nomad's
// API answers them: GPUlayer has one region (the agent's, "global" unless
// configured), one node pool and, without a namespace, "default".
const (
	DefaultRegion    = "global"
	DefaultNodePool  = "default"
	DefaultNamespace = "default"
)

// JobRead renders a stored job for a read: JobFromStructs, with Region
// (region, or DefaultRegion when empty), NodePool and Namespace filled the
// way Nomad answers them.
func JobRead(j *structs.Job, region string) *api.Job {
	out := JobFromStructs(j)
	if out == nil {
		return nil
	}
	if region == "" {
		region = DefaultRegion
	}
	out.Region = region
	out.NodePool = nodePoolRead(j.NodePool)
	if out.Namespace == "" {
		out.Namespace = DefaultNamespace
	}
	return out
}

// JobListStub renders a job for GET /v1/jobs, with its summary (nil
// when the caller has none).
func JobListStub(j *structs.Job, summary *api.JobSummary) *api.JobListStub {
	ns := j.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return &api.JobListStub{
		ID: j.ID, ParentID: j.ParentID, Name: j.Name, Namespace: ns, Datacenters: cloneStrings(j.Datacenters), Type: j.Type, Priority: j.Priority,
		Periodic: j.Periodic != nil, ParameterizedJob: j.ParameterizedJob != nil, Held: j.Held,
		NodePool: nodePoolRead(j.NodePool), Stop: j.Stop, Status: j.Status, StatusDescription: j.StatusDescription,
		JobSummary: summary, CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex, JobModifyIndex: j.JobModifyIndex,
		SubmitTime: j.SubmitTime, Meta: cloneStringMap(j.Meta), Version: j.Version,
	}
}

// JobSummary counts the allocations of job per task group and client
// status, as Nomad's job summary does: "pending" counts as Starting,
// "running" as Running, and so on; a group without allocations appears
// with zero counts. Queued is left 0 here (the caller may fill it from
// the latest evaluation).
func JobSummary(j *structs.Job, allocs []*structs.Allocation) *api.JobSummary {
	ns := j.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	s := &api.JobSummary{JobID: j.ID, Namespace: ns, Summary: map[string]api.TaskGroupSummary{},
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex}
	for _, tg := range j.TaskGroups {
		if tg != nil {
			s.Summary[tg.Name] = api.TaskGroupSummary{}
		}
	}
	for _, a := range allocs {
		if a == nil {
			continue
		}
		g := s.Summary[a.TaskGroup]
		switch a.ClientStatus {
		case structs.AllocClientStatusPending:
			g.Starting++
		case structs.AllocClientStatusRunning:
			g.Running++
		case structs.AllocClientStatusComplete:
			g.Complete++
		case structs.AllocClientStatusFailed:
			g.Failed++
		case structs.AllocClientStatusLost:
			g.Lost++
		}
		s.Summary[a.TaskGroup] = g
		if a.ModifyIndex > s.ModifyIndex {
			s.ModifyIndex = a.ModifyIndex
		}
	}
	return s
}

// NodeRead renders a node in Nomad's shape (nested Cpu and Memory, device
// Locality as {PciBusID}); GPUlayer's node classes are added fields.
func NodeRead(n *structs.Node) *api.Node {
	if n == nil {
		return nil
	}
	return &api.Node{
		ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass, HTTPAddr: n.HTTPAddr,
		Attributes: cloneStringMap(n.Attributes), Meta: cloneStringMap(n.Meta), Drivers: driversRead(n.Drivers),
		NodePool: nodePoolRead(n.NodePool), NodeResources: nodeResourcesRead(n.NodeResources), ReservedResources: reservedRead(n.ReservedResources),
		MemoryModel: n.MemoryModel, Availability: n.Availability, ReservedCapabilities: cloneStrings(n.Reserved),
		Status: n.Status, StatusDescription: n.StatusDescription, SchedulingEligibility: n.SchedulingEligibility,
		Drain: n.DrainStrategy != nil, StatusUpdatedAt: n.StatusUpdatedAt, CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
}

// NodeListStub renders a node for GET /v1/nodes: Nomad's stub, with the
// resources and node classes added.
func NodeListStub(n *structs.Node) *api.NodeListStub {
	addr := n.HTTPAddr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return &api.NodeListStub{
		Address: addr, ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodeClass: n.NodeClass, NodePool: nodePoolRead(n.NodePool),
		Drain: n.DrainStrategy != nil, SchedulingEligibility: n.SchedulingEligibility, Status: n.Status,
		StatusDescription: n.StatusDescription, Drivers: driversRead(n.Drivers), NodeResources: nodeResourcesRead(n.NodeResources),
		ReservedResources: reservedRead(n.ReservedResources), MemoryModel: n.MemoryModel, Availability: n.Availability,
		ReservedCapabilities: cloneStrings(n.Reserved), CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
}

func driversRead(ds map[string]*structs.DriverInfo) map[string]*api.DriverInfo {
	if ds == nil {
		return nil
	}
	out := make(map[string]*api.DriverInfo, len(ds))
	for k, d := range ds {
		if d == nil {
			continue
		}
		out[k] = &api.DriverInfo{Detected: d.Detected, Healthy: d.Healthy, HealthDescription: d.HealthDescription,
			Attributes: cloneStringMap(d.Attributes)}
	}
	return out
}

func nodeResourcesRead(r *structs.NodeResources) *api.NodeResources {
	if r == nil {
		return nil
	}
	out := &api.NodeResources{Cpu: api.NodeCpuResources{CpuShares: r.CPU, TotalCpuCores: uint16(min(max(r.Cores, 0), 1<<16-1))},
		Memory: api.NodeMemoryResources{MemoryMB: r.MemoryMB}, Networks: networksFromStructs(r.Networks),
		MinDynamicPort: r.MinDynamicPort, MaxDynamicPort: r.MaxDynamicPort}
	for _, g := range r.Devices {
		if g == nil {
			continue
		}
		dg := &api.DeviceGroup{Vendor: g.Vendor, Type: g.Type, Name: g.Name}
		if g.Attributes != nil {
			dg.Attributes = make(map[string]*api.Attribute, len(g.Attributes))
			for k, a := range g.Attributes {
				if a != nil {
					dg.Attributes[k] = &api.Attribute{Int: a.Int, Float: a.Float, String: a.String, Bool: a.Bool, Unit: a.Unit}
				}
			}
		}
		for _, in := range g.Instances {
			if in == nil {
				continue
			}
			di := &api.DeviceInstance{ID: in.ID, Healthy: in.Healthy, HealthDescription: in.HealthDescription}
			if in.Locality != "" {
				di.Locality = &api.NodeDeviceLocality{PciBusID: in.Locality}
			}
			dg.Instances = append(dg.Instances, di)
		}
		out.Devices = append(out.Devices, dg)
	}
	return out
}

func reservedRead(r *structs.NodeReservedResources) *api.NodeReservedResources {
	if r == nil {
		return nil
	}
	return &api.NodeReservedResources{Cpu: api.NodeReservedCpuResources{CpuShares: uint64(max(r.CPU, 0))},
		Memory:   api.NodeReservedMemoryResources{MemoryMB: uint64(max(r.MemoryMB, 0))},
		Networks: api.NodeReservedNetworkResources{ReservedHostPorts: r.Networks.ReservedHostPorts}}
}

// AllocRead renders an allocation in Nomad's shape (nested Cpu and
// Memory, RFC 3339 task times); region fills the embedded job's Region.
// withJob false leaves Job out, as in Nomad's list stubs.
func AllocRead(a *structs.Allocation, region string, withJob bool) *api.Allocation {
	if a == nil {
		return nil
	}
	ns := a.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	out := &api.Allocation{
		ID: a.ID, Namespace: ns, EvalID: a.EvalID, Name: a.Name, NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID,
		TaskGroup: a.TaskGroup, DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription, PreviousAllocation: a.PreviousAllocation,
		PreemptedByJob: a.PreemptedByJob, LogArchive: a.LogArchive, CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex,
		AllocModifyIndex: a.AllocModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
	if a.Job != nil {
		out.JobType = a.Job.Type
		if withJob {
			out.Job = JobRead(a.Job, region)
		}
	}
	if r := a.AllocatedResources; r != nil {
		out.AllocatedResources = &api.AllocatedResources{Tasks: make(map[string]*api.AllocatedTaskResources, len(r.Tasks))}
		for name, t := range r.Tasks {
			if t == nil {
				continue
			}
			tr := &api.AllocatedTaskResources{Cpu: api.AllocatedCpuResources{CpuShares: t.CPU},
				Memory: api.AllocatedMemoryResources{MemoryMB: t.MemoryMB}}
			for _, d := range t.Devices {
				if d != nil {
					tr.Devices = append(tr.Devices, &api.AllocatedDeviceResource{Vendor: d.Vendor, Type: d.Type, Name: d.Name,
						DeviceIDs: cloneStrings(d.DeviceIDs), MemoryMB: d.MemoryMB})
				}
			}
			out.AllocatedResources.Tasks[name] = tr
		}
		if sh := r.Shared; sh != nil {
			out.AllocatedResources.Shared = &api.AllocatedSharedResources{}
			for _, p := range sh.Ports {
				out.AllocatedResources.Shared.Ports = append(out.AllocatedResources.Shared.Ports,
					api.AllocatedPortMapping{Label: p.Label, Value: p.Value, To: p.To, HostIP: p.HostIP})
			}
			out.AllocatedResources.Shared.Endpoint = allocatedEndpointRead(sh.Endpoint)
		}
	}
	if a.TaskStates != nil {
		out.TaskStates = make(map[string]*api.TaskState, len(a.TaskStates))
		for name, ts := range a.TaskStates {
			if ts != nil {
				out.TaskStates[name] = taskStateRead(ts)
			}
		}
	}
	// Job versions and deployments.
	out.DeploymentID = a.DeploymentID
	if ds := a.DeploymentStatus; ds != nil {
		out.DeploymentStatus = &api.AllocDeploymentStatus{Healthy: cloneBoolPtr(ds.Healthy), Canary: ds.Canary, ModifyIndex: a.ModifyIndex}
		if ds.Timestamp != 0 {
			out.DeploymentStatus.Timestamp = time.Unix(0, ds.Timestamp).UTC()
		}
	}
	out.EndpointMember = endpointMemberRead(a.EndpointMember)
	if g := a.Gang; g != nil {
		out.Gang = &api.GangInfo{Rank: g.Rank, WorldSize: g.WorldSize, LocalRank: g.LocalRank, MasterAddr: g.MasterAddr,
			MasterPort: g.MasterPort, Peers: cloneStrings(g.Peers), Attempt: g.Attempt, Restarts: g.Restarts}
	}
	for _, o := range a.Outputs {
		if o != nil {
			out.Outputs = append(out.Outputs, &api.ArtifactRef{Path: o.Path, Digest: o.Digest, Size: o.Size})
		}
	}
	return out
}

// unixNano is the time of ns Unix nanoseconds, or the zero time for 0.
func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func taskStateRead(ts *structs.TaskState) *api.TaskState {
	out := &api.TaskState{State: ts.State, Failed: ts.Failed, ExitCode: ts.ExitCode, Restarts: ts.Restarts,
		StartedAt: unixNano(ts.StartedAt), FinishedAt: unixNano(ts.FinishedAt), Deadline: unixNano(ts.Deadline)}
	for _, e := range ts.Events {
		if e == nil {
			continue
		}
		if e.Type == structs.TaskEventRestarting {
			out.LastRestart = unixNano(e.Time)
		}
		out.Events = append(out.Events, &api.TaskEvent{Type: e.Type, Time: e.Time, Message: e.Message,
			DisplayMessage: e.DisplayMessage, ExitCode: e.ExitCode, Signal: e.Signal, Details: cloneStringMap(e.Details)})
	}
	return out
}

// EvalRead renders an evaluation in Nomad's shape (WaitUntil in RFC 3339,
// Namespace "default" when empty).
func EvalRead(e *structs.Evaluation) *api.Evaluation {
	if e == nil {
		return nil
	}
	ns := e.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	out := &api.Evaluation{
		ID: e.ID, Namespace: ns, Priority: e.Priority, Type: e.Type, TriggeredBy: e.TriggeredBy, JobID: e.JobID,
		JobModifyIndex: e.JobModifyIndex, NodeID: e.NodeID, Status: e.Status, StatusDescription: e.StatusDescription,
		NextEval: e.NextEval, PreviousEval: e.PreviousEval, BlockedEval: e.BlockedEval, SnapshotIndex: e.SnapshotIndex,
		CreateIndex: e.CreateIndex, ModifyIndex: e.ModifyIndex, CreateTime: e.CreateTime, ModifyTime: e.ModifyTime,
		WaitUntil: unixNano(e.WaitUntil),
	}
	if e.QueuedAllocations != nil {
		out.QueuedAllocations = make(map[string]int, len(e.QueuedAllocations))
		for k, v := range e.QueuedAllocations {
			out.QueuedAllocations[k] = v
		}
	}
	if e.FailedTGAllocs != nil {
		out.FailedTGAllocs = make(map[string]*api.AllocMetric, len(e.FailedTGAllocs))
		for k, m := range e.FailedTGAllocs {
			if m == nil {
				continue
			}
			out.FailedTGAllocs[k] = allocMetricRead(m)
		}
	}
	return out
}

func cloneIntMap(m map[string]int) map[string]int {
	if m == nil {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func allocMetricRead(m *structs.AllocMetric) *api.AllocMetric {
	if m == nil {
		return nil
	}
	return &api.AllocMetric{NodesEvaluated: m.NodesEvaluated, NodesFiltered: m.NodesFiltered,
		NodesExhausted: m.NodesExhausted, ConstraintFiltered: cloneIntMap(m.ConstraintFiltered),
		DimensionExhausted: cloneIntMap(m.DimensionExhausted), CoalescedFailures: m.CoalescedFailures,
		Explanation: m.Explanation, AwaitingStops: m.AwaitingStops}
}

// PlanRead renders a plan answer with Nomad's Diff, Annotations and
// FailedTGAllocs beside GPUlayer's own fields.
func PlanRead(jobID string, p *structs.JobPlanResponse) *api.JobPlanResponse {
	out := &api.JobPlanResponse{JobModifyIndex: p.JobModifyIndex, DiffLines: cloneStrings(p.Diff),
		Preemptions: cloneStrings(p.Preemptions), Annotations: &api.PlanAnnotations{DesiredTGUpdates: map[string]*api.DesiredUpdates{}}}
	diff := &api.JobDiff{ID: jobID, Type: "None"}
	switch {
	case p.JobModifyIndex == 0:
		diff.Type = "Added"
	case len(p.Diff) > 0:
		diff.Type = "Edited"
	}
	for _, g := range p.Groups {
		if g == nil {
			continue
		}
		out.Groups = append(out.Groups, &api.GroupPlan{Name: g.Name, Place: g.Place, Stop: g.Stop, InPlace: g.InPlace,
			Nodes: cloneIntMap(g.Nodes), Queued: g.Queued, Failure: allocMetricRead(g.Failure), Notes: cloneStrings(g.Notes)})
		out.Annotations.DesiredTGUpdates[g.Name] = &api.DesiredUpdates{Place: uint64(max(g.Place, 0)), Stop: uint64(max(g.Stop, 0)),
			InPlaceUpdate: uint64(max(g.InPlace, 0))}
		gd := &api.TaskGroupDiff{Type: diff.Type, Name: g.Name, Updates: map[string]uint64{}}
		if g.Place > 0 {
			gd.Updates["create"] = uint64(g.Place)
		}
		if g.Stop > 0 {
			gd.Updates["destroy"] = uint64(g.Stop)
		}
		if g.InPlace > 0 {
			gd.Updates["in-place update"] = uint64(g.InPlace)
		}
		diff.TaskGroups = append(diff.TaskGroups, gd)
		if g.Failure != nil {
			if out.FailedTGAllocs == nil {
				out.FailedTGAllocs = map[string]*api.AllocMetric{}
			}
			out.FailedTGAllocs[g.Name] = allocMetricRead(g.Failure)
		}
	}
	out.Diff = diff
	return out
}

// EventBatchRead renders a batch of the event stream with every payload
// in its wire shape (JobRead, AllocRead without the job, NodeRead,
// EvalRead) under its topic name, and Namespace set as Nomad's events
// carry it. It returns nil for nil.
func EventBatchRead(b *structs.EventBatch, region string) *api.EventBatch {
	if b == nil {
		return nil
	}
	out := &api.EventBatch{Index: b.Index, Events: make([]*api.Event, 0, len(b.Events))}
	for _, e := range b.Events {
		if e == nil {
			continue
		}
		ev := &api.Event{Topic: e.Topic, Type: e.Type, Key: e.Key, FilterKeys: cloneStrings(e.FilterKeys), Index: e.Index,
			Payload: map[string]json.RawMessage{}}
		var name string
		var v interface{}
		switch p := e.Payload; {
		case p.Job != nil:
			name, v = "Job", JobRead(p.Job, region)
			ev.Namespace = nsOr(p.Job.Namespace)
		case p.Allocation != nil:
			name, v = "Allocation", AllocRead(p.Allocation, region, false)
			ev.Namespace = nsOr(p.Allocation.Namespace)
		case p.Node != nil:
			name, v = "Node", NodeRead(p.Node)
		case p.Evaluation != nil:
			name, v = "Evaluation", EvalRead(p.Evaluation)
			ev.Namespace = nsOr(p.Evaluation.Namespace)
		case p.Deployment != nil:
			name, v = "Deployment", DeploymentFromStructs(p.Deployment)
			ev.Namespace = nsOr(p.Deployment.Namespace)
		case p.Service != nil:
			name, v = "Service", ServiceRegistrationFromStructs(p.Service)
			ev.Namespace = nsOr(p.Service.Namespace)
		case p.EndpointAlias != nil:
			name, v = "EndpointAlias", EndpointAliasFromStructs(p.EndpointAlias)
			ev.Namespace = nsOr(p.EndpointAlias.Namespace)
		}
		if name != "" {
			// The wire types hold only encodable values.
			raw, err := json.Marshal(v)
			if err == nil {
				ev.Payload[name] = raw
			}
		}
		out.Events = append(out.Events, ev)
	}
	return out
}

func nsOr(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// RegisterResponseRead renders a job registration's answer.
func RegisterResponseRead(r *structs.JobRegisterResponse) *api.JobRegisterResponse {
	return &api.JobRegisterResponse{EvalID: r.EvalID, EvalCreateIndex: r.EvalCreateIndex, JobModifyIndex: r.JobModifyIndex,
		Warnings: r.Warnings, Index: r.Index}
}

// DeregisterResponseRead renders a job stop's answer.
func DeregisterResponseRead(r *structs.JobDeregisterResponse) *api.JobDeregisterResponse {
	return &api.JobDeregisterResponse{EvalID: r.EvalID, EvalCreateIndex: r.EvalCreateIndex, JobModifyIndex: r.JobModifyIndex, Index: r.Index}
}

// QueueRead renders GET /v1/jobs/queue.
func QueueRead(q []*structs.JobQueueEntry) []*api.JobQueueEntry {
	out := make([]*api.JobQueueEntry, 0, len(q))
	for _, e := range q {
		if e == nil {
			continue
		}
		reasons := make(map[string]string, len(e.Reasons))
		for k, v := range e.Reasons {
			reasons[k] = v
		}
		out = append(out, &api.JobQueueEntry{JobID: e.JobID, Namespace: nsOr(e.Namespace), Type: e.Type, Priority: e.Priority,
			SubmitTime: e.SubmitTime, EvalID: e.EvalID, Status: e.Status, Queued: cloneIntMap(e.Queued), Reasons: reasons})
	}
	return out
}
