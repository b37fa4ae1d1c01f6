package structs

import (
	"fmt"
	"maps"
)

// Allocation desired statuses, set by the scheduler.
const (
	AllocDesiredStatusRun   = "run"
	AllocDesiredStatusStop  = "stop"
	AllocDesiredStatusEvict = "evict"
)

// Allocation client statuses, reported by the client.
const (
	AllocClientStatusPending  = "pending"
	AllocClientStatusRunning  = "running"
	AllocClientStatusComplete = "complete"
	AllocClientStatusFailed   = "failed"
	AllocClientStatusLost     = "lost"
)

// Task states.
const (
	TaskStatePending = "pending"
	TaskStateRunning = "running"
	TaskStateDead    = "dead"
)

// Task event types, as Nomad names them.
const (
	TaskEventReceived       = "Received"
	TaskEventSetup          = "Task Setup"
	TaskEventStarted        = "Started"
	TaskEventTerminated     = "Terminated"
	TaskEventRestarting     = "Restarting"
	TaskEventNotRestarting  = "Not Restarting"
	TaskEventDriverFailure  = "Driver Failure"
	TaskEventKilling        = "Killing"
	TaskEventKilled         = "Killed"
	TaskEventSetupFailure   = "Setup Failure"
	TaskEventFailedValidate = "Failed Validation"
)

// Allocation is one placement of a task group on a node.
type Allocation struct {
	ID        string
	Namespace string
	EvalID    string
	// Name is "job.group[index]".
	Name      string
	NodeID    string
	NodeName  string
	JobID     string
	Job       *Job
	TaskGroup string

	AllocatedResources *AllocatedResources

	DesiredStatus      string
	DesiredDescription string
	// DesiredTransition asks for a server-driven change (a drain's
	// migration).
	DesiredTransition DesiredTransition
	ClientStatus      string
	ClientDescription string
	TaskStates        map[string]*TaskState

	// PreviousAllocation is the allocation this one replaces, if any.
	PreviousAllocation string
	// Gang is set on members of a gang group: rank, world size and peers.
	Gang *GangInfo `json:",omitempty"`
	// PreemptedByJob is the ID of the job this allocation was evicted for
	// (DesiredStatus "evict"); see structs/preempt.go.
	PreemptedByJob string `json:",omitempty"`
	// Outputs are the files the tasks left in their output directories,
	// uploaded to the artifact store when they ended (path, digest, size);
	// set by the client's final update, all or none.
	Outputs []*ArtifactRef `json:",omitempty"`
	// LogArchive is the hex SHA-256 of a tar of the tasks' rotated log
	// files, archived by the client when the allocation finished, so
	// `alloc logs` reads them once the node is gone.
	LogArchive string `json:",omitempty"`
	// DeploymentID is the deployment that placed (or took over) the
	// allocation; DeploymentStatus its health there, set by the client's
	// health tracker or, for manual health, by a user.
	DeploymentID     string                 `json:",omitempty"`
	DeploymentStatus *AllocDeploymentStatus `json:",omitempty"`
	// EndpointMember is the allocation's state in its node's endpoint
	// router (structs/endpoint.go), set by the client's updates; nil for
	// groups without an endpoint.
	EndpointMember *EndpointMemberStatus `json:",omitempty"`

	CreateIndex      uint64
	ModifyIndex      uint64
	AllocModifyIndex uint64
	// CreateTime and ModifyTime are Unix nanoseconds, set by endpoints.
	CreateTime int64
	ModifyTime int64
}

// AllocatedResources is what the plan gave an allocation, per task.
type AllocatedResources struct {
	Tasks map[string]*AllocatedTaskResources
	// Shared holds what the whole allocation was given: its host ports.
	Shared *AllocatedSharedResources `json:",omitempty"`
}

// AllocatedTaskResources is one task's share: CPU in MHz, memory in MiB and
// the exact device instances.
type AllocatedTaskResources struct {
	CPU      int64
	MemoryMB int64
	Devices  []*AllocatedDeviceResource
}

// TaskState is a task's life on the client.
type TaskState struct {
	State    string // TaskStatePending, TaskStateRunning or TaskStateDead
	Failed   bool
	ExitCode int
	Restarts uint64
	// StartedAt and FinishedAt are Unix nanoseconds (0 when not yet).
	StartedAt  int64
	FinishedAt int64
	// Deadline is when the client stops the task for running past its
	// max_run_duration, in Unix nanoseconds (0: no deadline); it is set
	// once the allocation starts and kept across client restarts.
	Deadline int64 `json:",omitempty"`
	Events   []*TaskEvent
}

// TaskEvent is one step in a task's life, shown by `alloc status`.
type TaskEvent struct {
	Type string
	// Time is Unix nanoseconds.
	Time           int64
	Message        string
	DisplayMessage string
	ExitCode       int
	Signal         int
	Details        map[string]string
}

// TerminalStatus reports whether the allocation will not run (again): the
// server asked it to stop, or the client finished it.
func (a *Allocation) TerminalStatus() bool {
	switch a.DesiredStatus {
	case AllocDesiredStatusStop, AllocDesiredStatusEvict:
		return true
	}
	return a.ClientTerminalStatus()
}

// ClientTerminalStatus reports whether the client finished the allocation.
func (a *Allocation) ClientTerminalStatus() bool {
	switch a.ClientStatus {
	case AllocClientStatusComplete, AllocClientStatusFailed, AllocClientStatusLost:
		return true
	}
	return false
}

// HoldsResources reports whether the allocation's resources count against
// its node: it is not client-terminal. A stopped allocation still holds its
// GPUs until its client reports it finished, so no two running processes
// ever share a device.
func (a *Allocation) HoldsResources() bool { return !a.ClientTerminalStatus() }

// Index returns the allocation's index within its group, parsed from Name.
func (a *Allocation) Index() int {
	var idx int
	for i := len(a.Name) - 1; i >= 0; i-- {
		if a.Name[i] == '[' {
			_, _ = fmt.Sscanf(a.Name[i:], "[%d]", &idx)
			break
		}
	}
	return idx
}

// AllocName returns "job.group[index]".
func AllocName(job, group string, idx int) string {
	return fmt.Sprintf("%s.%s[%d]", job, group, idx)
}

// DeviceIDs returns every device instance ID the allocation holds.
func (a *Allocation) DeviceIDs() []string {
	if a.AllocatedResources == nil {
		return nil
	}
	var ids []string
	for _, tr := range a.AllocatedResources.Tasks {
		ids = append(ids, tr.DeviceIDs()...)
	}
	return ids
}

// DeviceIDs returns the instance IDs of every device the task holds, of
// any type, in the order of its Devices; nil for a nil receiver or none.
func (r *AllocatedTaskResources) DeviceIDs() []string {
	return r.deviceIDs("")
}

// GPUIDs returns the instance IDs (UUIDs) of the GPUs the task holds, in
// the order of its Devices: what CUDA_VISIBLE_DEVICES and the container
// runtime are given. nil for a nil receiver or no GPU.
func (r *AllocatedTaskResources) GPUIDs() []string {
	return r.deviceIDs(DeviceTypeGPU)
}

// deviceIDs returns the instance IDs of the devices of type typ ("" any).
func (r *AllocatedTaskResources) deviceIDs(typ string) []string {
	if r == nil {
		return nil
	}
	var ids []string
	for _, d := range r.Devices {
		if d != nil && (typ == "" || d.Type == typ) {
			ids = append(ids, d.DeviceIDs...)
		}
	}
	return ids
}

// ShallowCopy returns a copy that shares every pointer, map and slice with
// a. It is for a new version of an allocation stored in the state, whose
// versions are never mutated: the caller may replace fields of the copy,
// never change what they point at.
func (a *Allocation) ShallowCopy() *Allocation {
	if a == nil {
		return nil
	}
	n := *a
	return &n
}

// Copy returns a deep copy. The Job pointer is shared: jobs are immutable.
func (a *Allocation) Copy() *Allocation {
	if a == nil {
		return nil
	}
	n := *a
	if a.AllocatedResources != nil {
		ar := &AllocatedResources{Tasks: make(map[string]*AllocatedTaskResources, len(a.AllocatedResources.Tasks))}
		for k, tr := range a.AllocatedResources.Tasks {
			if tr == nil {
				ar.Tasks[k] = nil
				continue
			}
			c := *tr
			c.Devices = make([]*AllocatedDeviceResource, len(tr.Devices))
			for i, d := range tr.Devices {
				c.Devices[i] = d.Copy()
			}
			ar.Tasks[k] = &c
		}
		ar.Shared = a.AllocatedResources.Shared.Copy()
		n.AllocatedResources = ar
	}
	n.Gang = a.Gang.Copy()
	n.Outputs = copyArtifactRefs(a.Outputs)
	n.DeploymentStatus = a.DeploymentStatus.Copy()
	n.EndpointMember = a.EndpointMember.Copy()
	if a.TaskStates != nil {
		n.TaskStates = make(map[string]*TaskState, len(a.TaskStates))
		for k, ts := range a.TaskStates {
			n.TaskStates[k] = ts.Copy()
		}
	}
	return &n
}

// Copy returns a deep copy.
func (ts *TaskState) Copy() *TaskState {
	if ts == nil {
		return nil
	}
	n := *ts
	n.Events = make([]*TaskEvent, len(ts.Events))
	for i, e := range ts.Events {
		if e == nil {
			continue
		}
		ec := *e
		ec.Details = maps.Clone(e.Details)
		n.Events[i] = &ec
	}
	return &n
}
