// Package api holds the Go HTTP client and the JSON wire types of the
// GPUlayer HTTP API. Field names follow Nomad's API where the concept is the
// same, and the JSON encoding is the default encoding/json one (the Go field
// names), so the documents produced from these types decode into the
// structs package's types of the same shape and back.
package api

import (
	"encoding/json"
	"time"
)

// Job types accepted in Job.Type.
const (
	// JobTypeService is a long-running job that is restarted until stopped.
	JobTypeService = "service"
	// JobTypeBatch is a job whose tasks run to completion.
	JobTypeBatch = "batch"
)

// Restart modes accepted in RestartPolicy.Mode.
const (
	// RestartPolicyModeFail fails the allocation once the attempts in the
	// interval are used up.
	RestartPolicyModeFail = "fail"
	// RestartPolicyModeDelay waits until the interval has passed and then
	// starts counting attempts again.
	RestartPolicyModeDelay = "delay"
)

// Job is a unit of work submitted by a user: one or more task groups that are
// placed on nodes together. The fields from Status on are read-only: the
// server fills them and ignores what a client sends.
type Job struct {
	// ID is the unique identifier of the job within its namespace; the
	// jobspec parser sets it to the job block's label.
	ID string
	// Name is the display name of the job; the jobspec parser sets it to the
	// job block's label.
	Name string
	// Namespace is the namespace the job lives in; empty means the server's
	// default namespace.
	Namespace string
	// Region is the job's region; GPUlayer has one, the agent's ("global"
	// unless configured). Empty means that one; any other is refused.
	Region string `json:",omitempty"`
	// NodePool is the node pool the job is placed in (Nomad's
	// node_pool): empty means "default", "all" any node. A pool that does
	// not exist is refused.
	NodePool string `json:",omitempty"`
	// Type is the scheduler type: "service" or "batch".
	Type string
	// Priority orders jobs for scheduling and preemption, 1 (lowest) to 100
	// (highest).
	Priority int
	// Datacenters lists the datacenters the job may be placed in.
	Datacenters []string
	// Meta is free-form user metadata, visible to tasks and constraints.
	Meta map[string]string
	// Constraints restrict the nodes every task group of the job may use.
	Constraints []*Constraint
	// Affinities express node preferences for every task group of the job.
	Affinities []*Affinity
	// TaskGroups are the groups of tasks to place, in jobspec order.
	TaskGroups []*TaskGroup
	// Requires lists node capabilities every group needs, such as "voice".
	Requires []string `json:",omitempty"`
	// Availability is the node availability class the groups accept by
	// default: "continuous" (the default) or "opportunistic".
	Availability string `json:",omitempty"`
	// Update is the default update block of the job's groups.
	Update *UpdateStrategy `json:",omitempty"`

	// Periodic makes the job a periodic parent; ParameterizedJob a
	// parameterized one (nomadish/api/jobs_children.go). Neither gets
	// allocations itself; their children do.
	Periodic         *PeriodicConfig         `json:",omitempty"`
	ParameterizedJob *ParameterizedJobConfig `json:",omitempty"`
	// MaxRunningChildren, above zero, caps the children of a periodic or
	// parameterized job that are running at once (not dead, not held);
	// further children wait in order of creation. 0 is no limit.
	MaxRunningChildren int `json:",omitempty"`
	// ParentID, Dispatched, Payload (base64 in JSON) and
	// DispatchIdempotencyToken are set by the server on a child.
	ParentID                 string `json:",omitempty"`
	Dispatched               bool   `json:",omitempty"`
	Payload                  []byte `json:",omitempty"`
	DispatchIdempotencyToken string `json:",omitempty"`
	// Held is true on a child waiting for a running sibling to finish
	// (max_running_children), set by the server.
	Held bool `json:",omitempty"`

	// Status is the job's lifecycle status ("pending", "running", "dead"),
	// set by the server.
	Status string
	// StatusDescription explains Status in words, set by the server.
	StatusDescription string
	// Stop is true once the job has been asked to stop.
	Stop bool
	// Version counts the registrations of the job, starting at 0.
	Version uint64
	// Stable is true once a deployment of this version succeeded (or a
	// user marked it stable); auto_revert goes back to the newest one.
	Stable bool
	// SubmitTime is when the current version was submitted, in nanoseconds
	// since the Unix epoch.
	SubmitTime int64
	// CreateIndex is the Raft index at which the job was created.
	CreateIndex uint64
	// ModifyIndex is the Raft index of the last change to the job,
	// including status changes.
	ModifyIndex uint64
	// JobModifyIndex is the Raft index of the last change to the job's
	// specification (a new registration).
	JobModifyIndex uint64
}

// TaskGroup is a set of tasks that are always placed together on one node;
// Count copies of it are placed.
type TaskGroup struct {
	// Name is the group's name, unique within the job.
	Name string
	// Count is the number of allocations of this group to run.
	Count int
	// Constraints restrict the nodes this group may use, in addition to the
	// job's.
	Constraints []*Constraint
	// Affinities express node preferences for this group, in addition to
	// the job's.
	Affinities []*Affinity
	// RestartPolicy says how the client restarts failed tasks of the group;
	// nil means the server's default for the job type.
	RestartPolicy *RestartPolicy
	// ReschedulePolicy says when the servers replace a failed allocation
	// of the group on another placement; nil keeps the default (a failed
	// service allocation is replaced, a failed batch one is not).
	ReschedulePolicy *ReschedulePolicy `json:",omitempty"`
	// Tasks are the group's tasks, in jobspec order.
	Tasks []*Task
	// Meta is free-form user metadata for the group.
	Meta map[string]string
	// Gang places all Count allocations at once or none, and restarts them
	// together when one fails; tasks get RANK, WORLD_SIZE, LOCAL_RANK,
	// MASTER_ADDR and MASTER_PORT.
	Gang bool `json:",omitempty"`
	// Requires lists node capabilities the group needs, in addition to the
	// job's; it is placed only on nodes that reserve them.
	Requires []string `json:",omitempty"`
	// Availability overrides the job's availability class for the group.
	Availability string `json:",omitempty"`
	// Networks is the group's network block (at most one): its ports.
	Networks []*NetworkResource `json:",omitempty"`
	// Services are the group's service blocks.
	Services []*Service `json:",omitempty"`
	// Update is the group's update block: how a new version rolls out.
	Update *UpdateStrategy `json:",omitempty"`
	// MaxRunDuration bounds how long each allocation of the group runs
	// (batch jobs only), measured from its start on the client; a task
	// still running then is stopped and fails with a "Deadline Exceeded"
	// event. It encodes in JSON as integer nanoseconds, as Nomad's; zero
	// means no bound.
	MaxRunDuration time.Duration `json:",omitempty"`
	// ShutdownDelay is how long the client waits, once the allocation is
	// told to stop and its services are deregistered, before it stops the
	// tasks: integer nanoseconds, as Nomad's group shutdown_delay (zero:
	// no wait; at most one hour).
	ShutdownDelay time.Duration `json:",omitempty"`
	// Endpoint, on a service group with Count 2-16, places every
	// allocation of the group on one node behind one router on that node
	// (a GPUlayer addition); nil changes nothing.
	Endpoint *Endpoint `json:",omitempty"`
}

// Task is one process (or container) run by a driver.
type Task struct {
	// Name is the task's name, unique within the group.
	Name string
	// Driver names the driver that runs the task, e.g. "native" or "docker".
	Driver string
	// Config is the driver-specific configuration, with JSON-like values:
	// string, float64 or int, bool, []interface{} and
	// map[string]interface{}. After a JSON round trip numbers are float64.
	Config map[string]interface{}
	// Env holds environment variables set for the task, name to value.
	Env map[string]string
	// Resources is what the task needs from the node.
	Resources *Resources
	// Constraints restrict the nodes this task may use.
	Constraints []*Constraint
	// Affinities express node preferences for this task.
	Affinities []*Affinity
	// Meta is free-form user metadata for the task.
	Meta map[string]string
	// KillTimeout is how long the client waits after KillSignal before it
	// kills the task forcefully; it encodes in JSON as integer nanoseconds.
	KillTimeout time.Duration
	// KillSignal is the signal sent to stop the task, e.g. "SIGTERM"; empty
	// means the driver's default.
	KillSignal string
	// User is the user the task runs as; empty means the client's default
	// ("nobody" for native tasks on an agent running as root).
	User string `json:",omitempty"`
	// Artifacts are fetched beneath the task directory before it starts.
	Artifacts []*TaskArtifact `json:",omitempty"`
	// Services are the task's service blocks.
	Services []*Service `json:",omitempty"`
	// DispatchPayload writes a dispatched job's payload beneath local/.
	DispatchPayload *DispatchPayloadConfig `json:",omitempty"`
	// MaxRunDuration bounds this task as TaskGroup.MaxRunDuration does the
	// group's (integer nanoseconds; batch jobs only); with both set, the
	// shorter applies.
	MaxRunDuration time.Duration `json:",omitempty"`
	// ShutdownDelay is how long the client waits, after the group's
	// ShutdownDelay, before it sends this task its kill signal (integer
	// nanoseconds, as Nomad's task shutdown_delay; zero: no wait; at most
	// one hour).
	ShutdownDelay time.Duration `json:",omitempty"`
}

// TaskArtifact is Nomad's artifact block: GetterSource is
// "artifact://sha256/<hex>" or an https URL; GetterOptions may hold
// "checksum"; GetterMode is "file" or "dir"; RelativeDest is relative to
// the task directory ("local/data"); Checksum is "sha256:<64 hex>".
type TaskArtifact struct {
	GetterSource  string
	GetterOptions map[string]string `json:",omitempty"`
	GetterMode    string            `json:",omitempty"`
	RelativeDest  string
	Checksum      string `json:",omitempty"`
}

// Resources is what a task needs from a node.
type Resources struct {
	// CPU is the CPU share in MHz. Decoded from JSON that leaves it out,
	// it is DefaultCPU.
	CPU int
	// MemoryMB is the memory limit in MiB. Decoded from JSON that leaves
	// it out, it is DefaultMemoryMB.
	MemoryMB int
	// Devices are the devices (such as GPUs) the task needs.
	Devices []*RequestedDevice
}

// Defaults of a task's resources when a jobspec or a JSON body leaves
// cpu or memory out, as in Nomad (api Resources.Canonicalize): 100 MHz
// and 300 MiB. An explicit 0 stays 0 (no limit, nothing accounted).
const (
	DefaultCPU      = 100
	DefaultMemoryMB = 300
)

// UnmarshalJSON decodes Resources, giving a field the JSON leaves out its
// default (DefaultCPU, DefaultMemoryMB) rather than 0.
func (r *Resources) UnmarshalJSON(b []byte) error {
	type plain Resources
	v := plain{CPU: DefaultCPU, MemoryMB: DefaultMemoryMB}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Resources(v)
	return nil
}

// RequestedDevice asks for Count instances of a device kind.
type RequestedDevice struct {
	// Name is "vendor/type" or "vendor/type/model", e.g. "nvidia/gpu" or
	// "nvidia/gpu/H100", or just "type" such as "gpu".
	Name string
	// Count is the number of device instances wanted.
	Count int
	// MemoryMB, when above zero, asks for a share of one device's memory
	// in MiB instead of whole devices; Count must then be 1.
	MemoryMB int `json:",omitempty"`
	// Constraints restrict which device groups qualify, e.g. on
	// "${device.attr.memory}".
	Constraints []*Constraint
	// Affinities express preferences among qualifying device groups.
	Affinities []*Affinity
}

// Constraint is a hard placement requirement: LTarget Operand RTarget must
// hold. Targets are literal values or runtime interpolations such as
// "${attr.kernel.name}", "${meta.rack}" or "${device.attr.memory}".
type Constraint struct {
	// LTarget is the left-hand side, usually an interpolation.
	LTarget string
	// RTarget is the right-hand side, usually a literal.
	RTarget string
	// Operand is the comparison, e.g. "=", "!=", ">=", "regexp", "version".
	Operand string
}

// Affinity is a soft placement preference: nodes (or devices) for which
// LTarget Operand RTarget holds score higher, by Weight.
type Affinity struct {
	// LTarget is the left-hand side, usually an interpolation.
	LTarget string
	// RTarget is the right-hand side, usually a literal.
	RTarget string
	// Operand is the comparison, as in Constraint.
	Operand string
	// Weight is the strength of the preference, -100 to 100; negative
	// values repel.
	Weight int
}

// ReschedulePolicy says how often a failed allocation is replaced: at most
// Attempts replacements of the same allocation index within Interval, or
// without limit when Unlimited, each Delay after the failure (0: at once),
// growing with DelayFunction "exponential" up to MaxDelay. Durations encode
// in JSON as integer nanoseconds.
type ReschedulePolicy struct {
	Attempts      int
	Interval      time.Duration
	Unlimited     bool
	Delay         time.Duration `json:",omitempty"`
	DelayFunction string        `json:",omitempty"`
	MaxDelay      time.Duration `json:",omitempty"`
}

// RestartPolicy says how a client restarts the failed tasks of a group:
// at most Attempts restarts within Interval, Delay apart. Durations encode
// in JSON as integer nanoseconds.
type RestartPolicy struct {
	// Attempts is the number of restarts allowed within Interval.
	Attempts int
	// Interval is the window in which Attempts are counted.
	Interval time.Duration
	// Delay is the wait before each restart.
	Delay time.Duration
	// Mode is what happens once the attempts are used up: "fail" or "delay".
	Mode string
}
