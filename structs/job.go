package structs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Job types.
const (
	JobTypeBatch   = "batch"
	JobTypeService = "service"
)

// Job statuses, derived by the state store from the job's allocations and
// evaluations.
const (
	JobStatusPending = "pending" // registered, nothing placed yet or all queued
	JobStatusRunning = "running" // at least one allocation is not terminal
	JobStatusDead    = "dead"    // stopped, or every allocation is terminal
)

// Job priority bounds, as in Nomad.
const (
	JobMinPriority     = 1
	JobDefaultPriority = 50
	JobMaxPriority     = 100
)

// Count limits. The scheduler plans all of a job's allocations in one
// evaluation and one plan, so its memory and the size of the plan's Raft
// entry grow with the job's total count; without a bound, a count of 1e9
// made the server allocate until it ran out of memory, and again at every
// restart while the job was stored. 100,000 is what
// server/scheduler's BenchmarkPlace100kOn10kNodes places (about 200 MiB of
// heap, fake state included), so both limits stay within a measured load.
// Nomad sets no limit.
const (
	// MaxGroupCount is the largest Count one task group may ask for.
	MaxGroupCount = 100_000
	// MaxJobCount is the largest sum of Count over a job's task groups.
	MaxJobCount = 100_000
)

// Restart modes: after Attempts restarts within Interval, "fail" marks the
// task failed and "delay" waits until the interval ends and tries again.
const (
	RestartModeFail  = "fail"
	RestartModeDelay = "delay"
)

// KnownDrivers lists the task drivers GPUlayer ships. Validation rejects any
// other driver name.
var KnownDrivers = []string{"native", "docker"}

// KillSignals lists the signals a task's kill_signal may name. "TERM" and
// "sigterm" are accepted for "SIGTERM".
var KillSignals = []string{"SIGTERM", "SIGINT", "SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// ValidKillSignal reports whether name is one of KillSignals, with or
// without the "SIG" prefix, in any case.
func ValidKillSignal(name string) bool {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	return slices.Contains(KillSignals, n)
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)

// Job is the unit users submit: task groups to place on nodes. ID is the
// job's name and its key in the state store.
type Job struct {
	ID          string
	Name        string
	Namespace   string
	Type        string // JobTypeBatch or JobTypeService
	Priority    int    // 1..100; higher is placed first
	Datacenters []string
	Meta        map[string]string
	Constraints []*Constraint
	Affinities  []*Affinity
	TaskGroups  []*TaskGroup
	// Requires lists node capabilities every group needs (see
	// TaskGroup.Requires); a group's own list is added to it.
	Requires []string
	// Availability is the default node availability class the job's groups
	// accept (see TaskGroup.Availability).
	Availability string
	// NodePool is the node pool the job's allocations are placed in
	// (Nomad's node_pool): empty means NodePoolDefault, NodePoolAll any
	// pool (structs/node_pool.go).
	NodePool string `json:",omitempty"`
	// Update is the job-level update block: each group without its own
	// takes a copy (structs/deployment.go).
	Update *UpdateStrategy `json:",omitempty"`

	// Periodic and parameterized jobs (structs/job_children.go).
	//
	// Periodic, when set on a job without ParentID, makes it a periodic
	// parent: the leader launches children on its crons.
	Periodic *PeriodicConfig `json:",omitempty"`
	// ParameterizedJob makes the job a parameterized parent that `job
	// dispatch` creates children of; a dispatched child keeps it.
	ParameterizedJob *ParameterizedJobConfig `json:",omitempty"`
	// MaxRunningChildren, above zero, caps the children of this parent
	// that are not dead and not held; further children are registered held
	// and released oldest first as running ones finish. 0 is no limit.
	MaxRunningChildren int `json:",omitempty"`
	// ParentID is the parent's ID on a child, set by the server.
	ParentID string `json:",omitempty"`
	// Dispatched is true on a child made by dispatch.
	Dispatched bool `json:",omitempty"`
	// Payload is a dispatched child's payload, at most MaxDispatchPayload
	// bytes (base64 in JSON).
	Payload []byte `json:",omitempty"`
	// DispatchIdempotencyToken is the token the child was dispatched with.
	DispatchIdempotencyToken string `json:",omitempty"`
	// Held is true on a child registered while its parent had
	// MaxRunningChildren children running: it has no evaluation and gets
	// no allocation until the leader releases it.
	Held bool `json:",omitempty"`

	// Stop is true once the user stopped the job; its allocations are then
	// told to stop.
	Stop              bool
	Status            string
	StatusDescription string
	// Version counts registrations of this job ID that changed its spec,
	// starting at 0.
	Version uint64
	// Stable is set once a deployment of this version succeeded (or a user
	// marked it so with PUT /v1/job/:id/stable); auto_revert goes back to
	// the newest stable version. A new version starts unstable.
	Stable bool
	// SubmitTime is when the job was registered, in Unix nanoseconds, set by
	// the endpoint (never the FSM).
	SubmitTime     int64
	CreateIndex    uint64
	ModifyIndex    uint64
	JobModifyIndex uint64
}

// TaskGroup is a set of tasks placed together on one node, Count times.
type TaskGroup struct {
	Name          string
	Count         int
	Constraints   []*Constraint
	Affinities    []*Affinity
	RestartPolicy *RestartPolicy
	// ReschedulePolicy: see structs/reschedule.go; Canonicalize sets
	// DefaultReschedulePolicy when nil.
	ReschedulePolicy *ReschedulePolicy
	Tasks            []*Task
	Meta             map[string]string
	// Gang places all Count allocations of the group at once or none of
	// them, gives each a rank (see GangInfo) and restarts them together
	// when one fails. See structs/gang.go.
	Gang bool
	// Requires lists capabilities the group needs, such as "voice". It is
	// placed only on nodes that reserve every one of them, and a node that
	// reserves capabilities takes only groups requiring one of them (see
	// NodeTakesGroup).
	Requires []string
	// Availability is the node availability class the group accepts:
	// "continuous" (the default; only continuous nodes) or "opportunistic"
	// (opts in to opportunistic nodes as well as continuous ones). Empty
	// takes the job's value.
	Availability string
	// Networks is the group's network block (at most one): the host ports
	// its allocations need (structs/service.go).
	Networks []*NetworkResource `json:",omitempty"`
	// Services are the group's service blocks (structs/service.go).
	Services []*Service `json:",omitempty"`
	// Update is the group's update block: how a new job version rolls out
	// (structs/deployment.go); nil replaces everything at once.
	Update *UpdateStrategy `json:",omitempty"`
	// MaxRunDuration bounds how long each allocation of the group runs, in
	// a batch job only: past it, measured from the allocation's start on
	// its client, every task still running is stopped and fails with a
	// "Deadline Exceeded" event. Zero means no bound. See
	// structs/deadline.go.
	MaxRunDuration time.Duration `json:",omitempty"`
	// ShutdownDelay is how long the client waits, once the allocation is
	// told to stop and its services are deregistered, before it stops the
	// tasks (Nomad's group shutdown_delay; structs/shutdown_delay.go).
	// Zero means no wait; at most ShutdownDelayLimit.
	ShutdownDelay time.Duration `json:",omitempty"`
	// Endpoint, on a service group with Count 2-16, places every
	// allocation of the group on one node behind one router on that node
	// (structs/endpoint.go); nil changes nothing.
	Endpoint *Endpoint `json:",omitempty"`
}

// Task is one process or container run by a driver.
type Task struct {
	Name   string
	Driver string
	// Config is the driver's free-form configuration, e.g. for native
	// {"command": "/bin/sh", "args": ["-c", "echo hi"]}.
	Config      map[string]interface{}
	Env         map[string]string
	Resources   *Resources
	Constraints []*Constraint
	Affinities  []*Affinity
	Meta        map[string]string
	// KillTimeout is how long the driver waits after KillSignal before it
	// kills the task; zero means the default of 5 seconds.
	KillTimeout time.Duration
	// KillSignal is sent first when the task is stopped; empty means SIGTERM.
	KillSignal string
	// User is the user the task runs as (Nomad's task `user`): for the
	// native driver on an agent running as root, a user the client
	// allows; empty means the client's default ("nobody").
	User string
	// Artifacts are fetched beneath the task directory before the task
	// starts (structs/alloc_artifacts.go); at most MaxTaskArtifacts.
	Artifacts []*TaskArtifact `json:",omitempty"`
	// Services are the task's service blocks (structs/service.go).
	Services []*Service `json:",omitempty"`
	// DispatchPayload writes a dispatched job's payload to a file beneath
	// the task's local/ directory.
	DispatchPayload *DispatchPayloadConfig `json:",omitempty"`
	// MaxRunDuration bounds this task like TaskGroup.MaxRunDuration (batch
	// jobs only; zero: none); with both set, the shorter applies.
	MaxRunDuration time.Duration `json:",omitempty"`
	// ShutdownDelay is how long the client waits, after the group's
	// ShutdownDelay, before it sends this task its kill signal (Nomad's
	// task shutdown_delay). Zero means no wait; at most
	// ShutdownDelayLimit.
	ShutdownDelay time.Duration `json:",omitempty"`
}

// validUser is what a task's user may look like (POSIX portable user
// names, as useradd accepts them).
var validUser = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$`)

// Resources is what a task asks for.
type Resources struct {
	CPU      int // MHz
	MemoryMB int // MiB
	Devices  []*RequestedDevice
}

// RequestedDevice asks for Count instances of a device matching Name, which
// is "vendor/type" or "vendor/type/model" (e.g. "nvidia/gpu",
// "nvidia/gpu/NVIDIA H100 80GB HBM3") or just "type" ("gpu").
type RequestedDevice struct {
	Name  string
	Count int
	// MemoryMB, when above zero, asks for a share of one device's memory
	// in MiB instead of whole devices: several allocations may share one
	// instance while the sum of their shares stays within the instance's
	// "memory" attribute. Count must then be 1.
	MemoryMB    int
	Constraints []*Constraint
	Affinities  []*Affinity
}

// Constraint filters nodes (or device groups, for a device's constraints).
// LTarget and RTarget are literal values or interpolations such as
// "${attr.kernel.name}", "${node.class}", "${meta.rack}",
// "${device.attr.memory}". Operand is one of =, ==, !=, <, <=, >, >=,
// regexp, set_contains, is_set, is_not_set, version.
type Constraint struct {
	LTarget string
	RTarget string
	Operand string
}

// String renders the constraint as "LTarget Operand RTarget".
func (c *Constraint) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", c.LTarget, c.Operand, c.RTarget))
}

// Affinity is a soft constraint: a node (or device group) that matches gains
// Weight (-100..100) in ranking.
type Affinity struct {
	LTarget string
	RTarget string
	Operand string
	Weight  int
}

// RestartPolicy tells the client how to restart a failed task in place:
// at most Attempts restarts within Interval, waiting Delay before each.
type RestartPolicy struct {
	Attempts int
	Interval time.Duration
	Delay    time.Duration
	Mode     string // RestartModeFail or RestartModeDelay
}

// DefaultBatchRestartPolicy and DefaultServiceRestartPolicy follow Nomad's
// defaults (nomad/structs/structs.go): batch 3 attempts in 24h, 15s delay;
// service 2 attempts in 30m, 15s delay; both in "fail" mode.
func DefaultRestartPolicy(jobType string) *RestartPolicy {
	if jobType == JobTypeBatch {
		return &RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: RestartModeFail}
	}
	return &RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: RestartModeFail}
}

// Canonicalize fills defaults: Name from ID, Type service, Priority 50,
// Datacenters ["dc1"], Namespace "default", and by job type the restart
// policy and, except for gang groups, the reschedule policy
// (DefaultRestartPolicy, DefaultReschedulePolicy) of a group without one,
// and resources of 100 MHz and 300 MiB for a task without any.
// It changes j in place; call it before Validate.
func (j *Job) Canonicalize() {
	if j.Name == "" {
		j.Name = j.ID
	}
	if j.Namespace == "" {
		j.Namespace = "default"
	}
	if j.Type == "" {
		j.Type = JobTypeService
	}
	if j.Priority == 0 {
		j.Priority = JobDefaultPriority
	}
	if len(j.Datacenters) == 0 {
		j.Datacenters = []string{"dc1"}
	}
	j.canonicalizeChildren()
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		if tg.RestartPolicy == nil {
			tg.RestartPolicy = DefaultRestartPolicy(j.Type)
			if tg.Gang {
				// A gang member is never restarted alone: its failure
				// fails the allocation and the server restarts the
				// whole gang (see GangMaxRestarts).
				tg.RestartPolicy.Attempts = 0
			}
		}
		if tg.RestartPolicy.Mode == "" {
			tg.RestartPolicy.Mode = RestartModeFail
		}
		if tg.ReschedulePolicy == nil && !tg.Gang {
			tg.ReschedulePolicy = DefaultReschedulePolicy(j.Type)
		} else if rp := tg.ReschedulePolicy; rp != nil && rp.Delay == 0 && rp.DelayFunction == "" && rp.MaxDelay == 0 {
			// A block that says nothing of the delay (reschedule
			// { unlimited = true }) takes the job type's default delay,
			// as Nomad fills a partial block; otherwise it would replace
			// a failing task in a tight loop.
			d := DefaultReschedulePolicy(j.Type)
			c := *rp
			c.Delay, c.DelayFunction, c.MaxDelay = d.Delay, d.DelayFunction, d.MaxDelay
			tg.ReschedulePolicy = &c
		}
		tg.canonicalizeServices()
		for _, t := range tg.Tasks {
			if t != nil && t.Resources == nil {
				t.Resources = &Resources{CPU: 100, MemoryMB: 300}
			}
		}
		if tg.Update == nil && j.Update != nil {
			tg.Update = j.Update.Copy()
		}
		if tg.Update != nil {
			canonicalizeUpdate(tg.Update, groupAsksForGPU(tg))
		}
	}
}

// Validate checks the job and returns a *ValidationError (matching
// ErrInvalid) that names every bad field, or nil.
func (j *Job) Validate() error {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if !validJobID(j.ID, j.ParentID) {
		add("ID: must be 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit, got %q", j.ID)
	}
	if j.Type != JobTypeBatch && j.Type != JobTypeService {
		add("type: must be %q or %q, got %q", JobTypeBatch, JobTypeService, j.Type)
	}
	if j.Priority < JobMinPriority || j.Priority > JobMaxPriority {
		add("priority: must be between %d and %d, got %d", JobMinPriority, JobMaxPriority, j.Priority)
	}
	for i, c := range j.Constraints {
		if err := c.Validate(); err != nil {
			add("constraint %d: %v", i+1, err)
		}
	}
	for _, e := range validateClass(j.Requires, j.Availability) {
		add("%s", e)
	}
	p = append(p, j.fieldProblems()...)
	p = append(p, j.childrenProblems()...)
	p = append(p, j.endpointProblems()...)
	if len(j.TaskGroups) == 0 {
		add("group: a job needs at least one task group")
	}
	if msg := j.totalCountProblem(); msg != "" {
		add("%s", msg)
	}
	seenGroups := map[string]bool{}
	for i, tg := range j.TaskGroups {
		if tg == nil {
			add("group %d: is null", i+1)
			continue
		}
		where := fmt.Sprintf("group %q", tg.Name)
		if !validName.MatchString(tg.Name) {
			add("group %d: name: invalid name %q", i+1, tg.Name)
		}
		if seenGroups[tg.Name] {
			add("%s: duplicate group name", where)
		}
		seenGroups[tg.Name] = true
		for _, e := range tg.validate(j.Type) {
			add("%s: %s", where, e)
		}
		for _, e := range updateProblems(j.Type, tg) {
			add("%s: %s", where, e)
		}
		if _, err := IdlePolicyFor(j, tg.Name); err != nil {
			add("%s: %s", where, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
	}
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Problems: p}
}

// ValidateCounts checks only the counts of j's groups: each between 0 and
// MaxGroupCount, and their sum at most MaxJobCount. It returns a
// *ValidationError (matching ErrInvalid) naming each bad count in the
// words Validate uses, or nil. The scheduler calls it before planning, so
// a job stored by a build without these limits is refused instead of
// planned.
func (j *Job) ValidateCounts() error {
	var p []string
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		if msg := groupCountProblem(tg.Count); msg != "" {
			p = append(p, fmt.Sprintf("group %q: %s", tg.Name, msg))
		}
	}
	if msg := j.totalCountProblem(); msg != "" {
		p = append(p, msg)
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

// groupCountProblem returns the problem of a group's count, or "".
func groupCountProblem(count int) string {
	switch {
	case count < 0:
		return fmt.Sprintf("count: must be 0 or more, got %d", count)
	case count > MaxGroupCount:
		return fmt.Sprintf("count: must be at most %d, got %d", MaxGroupCount, count)
	}
	return ""
}

// totalCountProblem returns the problem of the sum of the groups' counts,
// or "". Counts out of range are left out of the sum (they are reported on
// their own), so it cannot overflow.
func (j *Job) totalCountProblem() string {
	total := 0
	for _, tg := range j.TaskGroups {
		if tg != nil && groupCountProblem(tg.Count) == "" {
			total += tg.Count
		}
	}
	if total > MaxJobCount {
		return fmt.Sprintf("count: the groups ask for %d allocations in all, at most %d", total, MaxJobCount)
	}
	return ""
}

func (tg *TaskGroup) validate(jobType string) []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if msg := groupCountProblem(tg.Count); msg != "" {
		add("%s", msg)
	}
	if tg.Gang && tg.Count < 1 {
		add("gang: a gang group needs count of at least 1, got %d", tg.Count)
	}
	p = append(p, validateClass(tg.Requires, tg.Availability)...)
	for _, msg := range validateReschedule(tg.ReschedulePolicy) {
		add("%s", msg)
	}
	p = append(p, rescheduleBoundProblems(tg.ReschedulePolicy)...)
	p = append(p, deadlineProblems(jobType, tg)...)
	p = append(p, shutdownDelayProblems(tg)...)
	p = append(p, envMapProblems("meta", tg.Meta)...)
	p = append(p, groupNetworkProblems(tg)...)
	p = append(p, groupServiceProblems(tg)...)
	p = append(p, listProblems("", len(tg.Constraints), len(tg.Affinities))...)
	if rp := tg.RestartPolicy; rp != nil {
		p = append(p, restartProblems(rp)...)
		if rp.Attempts < 0 {
			add("restart: attempts: must be 0 or more, got %d", rp.Attempts)
		}
		if rp.Delay < 0 || rp.Interval < 0 {
			add("restart: delay and interval must not be negative")
		}
		if rp.Mode != RestartModeFail && rp.Mode != RestartModeDelay {
			add("restart: mode: must be %q or %q, got %q", RestartModeFail, RestartModeDelay, rp.Mode)
		}
	}
	for i, c := range tg.Constraints {
		if err := c.Validate(); err != nil {
			add("constraint %d: %v", i+1, err)
		}
	}
	if len(tg.Tasks) == 0 {
		add("task: a group needs at least one task")
	}
	seen := map[string]bool{}
	for i, t := range tg.Tasks {
		if t == nil {
			add("task %d: is null", i+1)
			continue
		}
		where := fmt.Sprintf("task %q", t.Name)
		if !validName.MatchString(t.Name) {
			add("task %d: name: invalid name %q", i+1, t.Name)
		}
		if seen[t.Name] {
			add("%s: duplicate task name", where)
		}
		seen[t.Name] = true
		if t.Driver == "" {
			add("%s: driver: is required", where)
		} else if !slices.Contains(KnownDrivers, t.Driver) {
			add("%s: driver: unknown driver %q (known: %s)", where, t.Driver, strings.Join(KnownDrivers, ", "))
		} else if err := ValidateDriverConfig(t.Driver, t.Config, t.Resources); err != nil {
			add("%s: config: %v", where, err)
		}
		if t.KillSignal != "" && !ValidKillSignal(t.KillSignal) {
			add("%s: kill_signal: unknown signal %q (known: %s)", where, t.KillSignal, strings.Join(KillSignals, ", "))
		}
		if t.User != "" && !validUser.MatchString(t.User) {
			add("%s: user: %q is not a user name (letters, digits, '_', '.', '-'; at most 32)", where, t.User)
		}
		if t.KillTimeout < 0 {
			add("%s: kill_timeout: must not be negative, got %s", where, t.KillTimeout)
		}
		for _, msg := range taskBoundProblems(t) {
			add("%s: %s", where, msg)
		}
		for _, msg := range artifactProblems(t.Artifacts) {
			add("%s: %s", where, msg)
		}
		if r := t.Resources; r != nil {
			if r.CPU < 0 {
				add("%s: resources: cpu: must be 0 or more MHz, got %d", where, r.CPU)
			}
			if r.MemoryMB < 0 {
				add("%s: resources: memory: must be 0 or more MiB, got %d", where, r.MemoryMB)
			}
			for j, d := range r.Devices {
				if d == nil {
					add("%s: resources: device %d: is null", where, j+1)
					continue
				}
				dw := fmt.Sprintf("%s: resources: device %q", where, d.Name)
				if _, _, _, err := ParseDeviceName(d.Name); err != nil {
					add("%s: name: %v", dw, err)
				}
				if d.Count < 1 {
					add("%s: count: must be at least 1, got %d", dw, d.Count)
				}
				if d.MemoryMB < 0 {
					add("%s: memory: must be 0 or more MiB, got %d", dw, d.MemoryMB)
				}
				if d.MemoryMB > 0 && d.Count > 1 {
					add("%s: memory: a memory share is of one device; count must be 1, got %d", dw, d.Count)
				}
				for k, c := range d.Constraints {
					if err := c.Validate(); err != nil {
						add("%s: constraint %d: %v", dw, k+1, err)
					}
				}
			}
		}
		for k, c := range t.Constraints {
			if err := c.Validate(); err != nil {
				add("%s: constraint %d: %v", where, k+1, err)
			}
		}
	}
	return p
}

// Validate checks the operator and that both sides are present where the
// operator needs them.
func (c *Constraint) Validate() error {
	if c == nil {
		return fmt.Errorf("is null")
	}
	switch c.Operand {
	case "=", "==", "!=", "<", "<=", ">", ">=", "regexp", "set_contains", "version":
		if c.LTarget == "" {
			return fmt.Errorf("attribute: is required for operator %q", c.Operand)
		}
		if c.Operand == "regexp" {
			if _, err := regexp.Compile(c.RTarget); err != nil {
				return fmt.Errorf("value: bad regexp: %v", err)
			}
		}
	case "is_set", "is_not_set":
		if c.LTarget == "" {
			return fmt.Errorf("attribute: is required for operator %q", c.Operand)
		}
	default:
		return fmt.Errorf("operator: unknown operator %q", c.Operand)
	}
	return nil
}

// LookupTaskGroup returns the group named name, or nil.
func (j *Job) LookupTaskGroup(name string) *TaskGroup {
	for _, tg := range j.TaskGroups {
		if tg.Name == name {
			return tg
		}
	}
	return nil
}

// LookupTask returns the task named name, or nil.
func (tg *TaskGroup) LookupTask(name string) *Task {
	for _, t := range tg.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Copy returns a deep copy of the job. Task Config values are copied one
// level deep (maps and slices inside are shared, and never mutated).
func (j *Job) Copy() *Job {
	if j == nil {
		return nil
	}
	n := *j
	n.Datacenters = slices.Clone(j.Datacenters)
	n.Meta = maps.Clone(j.Meta)
	n.Constraints = copyConstraints(j.Constraints)
	n.Affinities = copyAffinities(j.Affinities)
	n.Requires = slices.Clone(j.Requires)
	n.Update = j.Update.Copy()
	n.Periodic = j.Periodic.copy()
	n.ParameterizedJob = j.ParameterizedJob.copy()
	n.Payload = slices.Clone(j.Payload)
	if j.TaskGroups != nil {
		n.TaskGroups = make([]*TaskGroup, len(j.TaskGroups))
		for i, tg := range j.TaskGroups {
			n.TaskGroups[i] = tg.Copy()
		}
	}
	return &n
}

// Copy returns a deep copy of the group.
func (tg *TaskGroup) Copy() *TaskGroup {
	if tg == nil {
		return nil
	}
	n := *tg
	n.Constraints = copyConstraints(tg.Constraints)
	n.Affinities = copyAffinities(tg.Affinities)
	if tg.ReschedulePolicy != nil {
		rs := *tg.ReschedulePolicy
		n.ReschedulePolicy = &rs
	}
	if tg.RestartPolicy != nil {
		rp := *tg.RestartPolicy
		n.RestartPolicy = &rp
	}
	n.Meta = maps.Clone(tg.Meta)
	n.Requires = slices.Clone(tg.Requires)
	n.Networks = copyNetworks(tg.Networks)
	n.Services = copyServices(tg.Services)
	n.Update = tg.Update.Copy()
	n.Endpoint = tg.Endpoint.Copy()
	if tg.Tasks != nil {
		n.Tasks = make([]*Task, len(tg.Tasks))
		for i, t := range tg.Tasks {
			n.Tasks[i] = t.Copy()
		}
	}
	return &n
}

// Copy returns a deep copy of the task.
func (t *Task) Copy() *Task {
	if t == nil {
		return nil
	}
	n := *t
	n.Config = maps.Clone(t.Config)
	n.Env = maps.Clone(t.Env)
	n.Meta = maps.Clone(t.Meta)
	n.Constraints = copyConstraints(t.Constraints)
	n.Affinities = copyAffinities(t.Affinities)
	n.Resources = t.Resources.Copy()
	n.Artifacts = copyTaskArtifacts(t.Artifacts)
	n.Services = copyServices(t.Services)
	if t.DispatchPayload != nil {
		dp := *t.DispatchPayload
		n.DispatchPayload = &dp
	}
	return &n
}

// Copy returns a deep copy of the resources.
func (r *Resources) Copy() *Resources {
	if r == nil {
		return nil
	}
	n := *r
	if r.Devices == nil {
		return &n
	}
	n.Devices = make([]*RequestedDevice, len(r.Devices))
	for i, d := range r.Devices {
		if d == nil {
			continue
		}
		dc := *d
		dc.Constraints = copyConstraints(d.Constraints)
		dc.Affinities = copyAffinities(d.Affinities)
		n.Devices[i] = &dc
	}
	return &n
}

func copyConstraints(cs []*Constraint) []*Constraint {
	if cs == nil {
		return nil
	}
	out := make([]*Constraint, len(cs))
	for i, c := range cs {
		if c != nil {
			cc := *c
			out[i] = &cc
		}
	}
	return out
}

func copyAffinities(as []*Affinity) []*Affinity {
	if as == nil {
		return nil
	}
	out := make([]*Affinity, len(as))
	for i, a := range as {
		if a != nil {
			ac := *a
			out[i] = &ac
		}
	}
	return out
}
