package api

import "time"

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

// Allocation is one placement of a task group on a node.
type Allocation struct {
	ID        string
	Namespace string
	EvalID    string
	// Name is "job.group[index]".
	Name     string
	NodeID   string
	NodeName string
	JobID    string
	// JobType is the job's type ("service", "batch"), as in Nomad's list
	// stubs.
	JobType   string `json:",omitempty"`
	Job       *Job
	TaskGroup string

	AllocatedResources *AllocatedResources

	DesiredStatus      string
	DesiredDescription string
	ClientStatus       string
	ClientDescription  string
	TaskStates         map[string]*TaskState

	// PreviousAllocation is the allocation this one replaces, if any.
	PreviousAllocation string
	// Gang is set on members of a gang group.
	Gang *GangInfo `json:",omitempty"`
	// PreemptedByJob names the job an evicted allocation made room for.
	PreemptedByJob string `json:",omitempty"`
	// Outputs are the files the tasks left in their output directories,
	// uploaded when they ended.
	Outputs []*ArtifactRef `json:",omitempty"`
	// LogArchive is the hex SHA-256 of the tar of the tasks' log files,
	// archived when the allocation finished.
	LogArchive string `json:",omitempty"`
	// DeploymentID is the deployment that placed the allocation, and
	// DeploymentStatus its health there.
	DeploymentID     string                 `json:",omitempty"`
	DeploymentStatus *AllocDeploymentStatus `json:",omitempty"`
	// EndpointMember is the allocation's state in its node's endpoint
	// router (a group with an endpoint block); absent otherwise.
	EndpointMember *AllocEndpointMember `json:",omitempty"`

	CreateIndex      uint64
	ModifyIndex      uint64
	AllocModifyIndex uint64
	// CreateTime and ModifyTime are Unix nanoseconds.
	CreateTime int64
	ModifyTime int64
}

// ArtifactRef is one recorded file: Path "<task>/<relative path>",
// Digest the lower-case hex SHA-256, Size in bytes.
type ArtifactRef struct {
	Path   string
	Digest string
	Size   int64
}

// AllocatedResources is what the plan gave an allocation, per task name.
type AllocatedResources struct {
	Tasks map[string]*AllocatedTaskResources
	// Shared holds the allocation's host ports.
	Shared *AllocatedSharedResources `json:",omitempty"`
}

// AllocatedTaskResources is one task's share, in Nomad's shape: CPU in
// MHz, memory in MiB and the exact device instances.
type AllocatedTaskResources struct {
	Cpu     AllocatedCpuResources
	Memory  AllocatedMemoryResources
	Devices []*AllocatedDeviceResource
}

// AllocatedCpuResources is a task's CPU share in MHz.
type AllocatedCpuResources struct {
	CpuShares int64
}

// AllocatedMemoryResources is a task's memory in MiB.
type AllocatedMemoryResources struct {
	MemoryMB int64
}

// DeviceIDs returns the instance IDs of every device the task holds, in
// the order of its Devices; nil for a nil receiver or none. It mirrors
// structs.AllocatedTaskResources.DeviceIDs.
func (r *AllocatedTaskResources) DeviceIDs() []string {
	if r == nil {
		return nil
	}
	var ids []string
	for _, d := range r.Devices {
		if d != nil {
			ids = append(ids, d.DeviceIDs...)
		}
	}
	return ids
}

// AllocatedDeviceResource names the exact device instances a task holds
// from one device group.
type AllocatedDeviceResource struct {
	Vendor    string
	Type      string
	Name      string
	DeviceIDs []string
	// MemoryMB is the share of the one device instance held, in MiB, for a
	// memory-share request; 0 means whole devices.
	MemoryMB int64 `json:",omitempty"`
}

// GangInfo is a gang member's place in its gang.
type GangInfo struct {
	Rank       int
	WorldSize  int
	LocalRank  int
	MasterAddr string
	MasterPort int
	// Peers holds each member's node host, indexed by rank.
	Peers []string
	// Attempt counts placements of the whole gang; Restarts those caused
	// by a member failing.
	Attempt  int
	Restarts int
}

// ID returns "vendor/type/name".
func (d *AllocatedDeviceResource) ID() string { return d.Vendor + "/" + d.Type + "/" + d.Name }

// TaskState is a task's life on the client.
type TaskState struct {
	// State is "pending", "running" or "dead".
	State    string
	Failed   bool
	ExitCode int
	Restarts uint64
	// LastRestart, StartedAt and FinishedAt are RFC 3339 times in JSON;
	// the zero time when not yet.
	LastRestart time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	// Deadline is when the client stops the task for running past its
	// max_run_duration (RFC 3339; left out when there is none). A GPUlayer
	// addition.
	Deadline time.Time `json:",omitzero"`
	Events   []*TaskEvent
}

// TaskEvent is one step in a task's life.
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

// ClientTerminalStatus reports whether the client finished the allocation.
func (a *Allocation) ClientTerminalStatus() bool {
	switch a.ClientStatus {
	case AllocClientStatusComplete, AllocClientStatusFailed, AllocClientStatusLost:
		return true
	}
	return false
}

// DeviceIDs returns the instance IDs of every device the allocation's
// tasks hold; nil when none. It mirrors structs.Allocation.DeviceIDs.
func (a *Allocation) DeviceIDs() []string {
	if a == nil || a.AllocatedResources == nil {
		return nil
	}
	var ids []string
	for _, tr := range a.AllocatedResources.Tasks {
		ids = append(ids, tr.DeviceIDs()...)
	}
	return ids
}
