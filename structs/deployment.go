package structs

import (
	"encoding/json"
	"fmt"
	"time"
)

// Update strategy health checks (the update block's health_check).
const (
	// UpdateHealthCheckChecks: healthy when every task runs and the
	// allocation's service checks pass; with no checks it behaves as
	// task_states (as Nomad).
	UpdateHealthCheckChecks = "checks"
	// UpdateHealthCheckTaskStates: healthy when every task has run,
	// without a restart, for min_healthy_time.
	UpdateHealthCheckTaskStates = "task_states"
	// UpdateHealthCheckManual: the client sets nothing; a user sets the
	// health with PUT /v1/deployment/allocation-health/:id.
	UpdateHealthCheckManual = "manual"
)

// Default update strategy, as Nomad's DefaultUpdateStrategy; groups that
// ask for a GPU get minutes-long health waits instead (a model server
// loads its weights first).
const (
	DefaultUpdateMaxParallel      = 1
	DefaultUpdateMinHealthyTime   = 10 * time.Second
	DefaultUpdateHealthyDeadline  = 5 * time.Minute
	DefaultUpdateProgressDeadline = 10 * time.Minute

	GPUUpdateMinHealthyTime   = 1 * time.Minute
	GPUUpdateHealthyDeadline  = 20 * time.Minute
	GPUUpdateProgressDeadline = 30 * time.Minute

	// MaxUpdateDuration bounds every duration of an update block.
	MaxUpdateDuration = 24 * time.Hour
)

// UpdateStrategy is a group's update block (Nomad's `update`): how a new
// job version replaces the allocations of the old one. A zero duration
// takes the default when the job is canonicalized.
type UpdateStrategy struct {
	// MaxParallel is how many allocations are replaced at a time; 0
	// turns deployments off for the group (everything at once).
	MaxParallel int
	// HealthCheck is UpdateHealthCheckChecks (default),
	// UpdateHealthCheckTaskStates or UpdateHealthCheckManual.
	HealthCheck string
	// MinHealthyTime is how long an allocation must stay healthy before it
	// counts as healthy.
	MinHealthyTime time.Duration
	// HealthyDeadline is how long an allocation has to become healthy
	// before it is marked unhealthy.
	HealthyDeadline time.Duration
	// ProgressDeadline fails the deployment when no allocation became
	// healthy within it (0: no deadline). A canary that cannot be placed
	// yet does not start it.
	ProgressDeadline time.Duration
	// AutoRevert registers the newest stable version again when the
	// deployment fails.
	AutoRevert bool
	// AutoPromote promotes the canaries once they are all healthy.
	AutoPromote bool
	// Canary is how many allocations of the new version run beside the
	// old ones until the deployment is promoted (at most Count).
	Canary int
	// MaxUnavailable, when set, bounds how many of the group's Count may
	// be without a healthy allocation during the update. 0 means a new
	// allocation is placed beside the old one and the old one stops only
	// once the new one is healthy, so the healthy count never drops below
	// Count; when there is no room for the extra allocation, nothing
	// stops and the evaluation says why. Nil (the default) stops first,
	// MaxParallel at a time, as Nomad.
	MaxUnavailable *int `json:",omitempty"`
}

// Copy returns a deep copy.
func (u *UpdateStrategy) Copy() *UpdateStrategy {
	if u == nil {
		return nil
	}
	c := *u
	if u.MaxUnavailable != nil {
		m := *u.MaxUnavailable
		c.MaxUnavailable = &m
	}
	return &c
}

// Rolling reports whether the strategy makes deployments (MaxParallel
// above 0).
func (u *UpdateStrategy) Rolling() bool { return u != nil && u.MaxParallel > 0 }

// SurgeFirst reports whether new allocations are placed beside the old
// ones before any old one stops (MaxUnavailable set to 0).
func (u *UpdateStrategy) SurgeFirst() bool {
	return u != nil && u.MaxUnavailable != nil && *u.MaxUnavailable == 0
}

// canonicalizeUpdate fills the defaults of a group's update block; gpu
// selects the minutes-long health waits.
func canonicalizeUpdate(u *UpdateStrategy, gpu bool) {
	if u.HealthCheck == "" {
		u.HealthCheck = UpdateHealthCheckChecks
	}
	minHealthy, healthy, progress := DefaultUpdateMinHealthyTime, DefaultUpdateHealthyDeadline, DefaultUpdateProgressDeadline
	if gpu {
		minHealthy, healthy, progress = GPUUpdateMinHealthyTime, GPUUpdateHealthyDeadline, GPUUpdateProgressDeadline
	}
	if u.MinHealthyTime == 0 {
		u.MinHealthyTime = minHealthy
	}
	if u.HealthyDeadline == 0 {
		u.HealthyDeadline = max(healthy, u.MinHealthyTime+time.Second)
	}
	if u.ProgressDeadline == 0 {
		u.ProgressDeadline = max(progress, u.HealthyDeadline+time.Second)
	}
}

// updateProblems returns the problems of a group's update block, each
// starting with "update: " and the attribute, in jobspec words.
func updateProblems(jobType string, tg *TaskGroup) []string {
	u := tg.Update
	if u == nil {
		return nil
	}
	var p []string
	add := func(format string, a ...any) { p = append(p, "update: "+fmt.Sprintf(format, a...)) }
	if jobType != JobTypeService {
		add("an update block is only allowed in a service job, this job is of type %q", jobType)
		return p
	}
	if u.MaxParallel < 0 || u.MaxParallel > MaxGroupCount {
		add("max_parallel: must be between 0 and %d, got %d", MaxGroupCount, u.MaxParallel)
	}
	switch u.HealthCheck {
	case UpdateHealthCheckChecks, UpdateHealthCheckTaskStates, UpdateHealthCheckManual:
	default:
		add("health_check: must be %q, %q or %q, got %q", UpdateHealthCheckChecks, UpdateHealthCheckTaskStates, UpdateHealthCheckManual, u.HealthCheck)
	}
	if u.Canary < 0 {
		add("canary: must be 0 or more, got %d", u.Canary)
	} else if u.Canary > tg.Count {
		add("canary: must be at most the group's count (%d), got %d", tg.Count, u.Canary)
	}
	if u.MaxUnavailable != nil && (*u.MaxUnavailable < 0 || *u.MaxUnavailable > max(tg.Count, 0)) {
		add("max_unavailable: must be between 0 and the group's count (%d), got %d", tg.Count, *u.MaxUnavailable)
	}
	durs := []struct {
		name string
		d    time.Duration
	}{{"min_healthy_time", u.MinHealthyTime}, {"healthy_deadline", u.HealthyDeadline}, {"progress_deadline", u.ProgressDeadline}}
	bad := false
	for _, d := range durs {
		if d.d < 0 || d.d > MaxUpdateDuration {
			add("%s: must be between 0 and %s, got %s", d.name, MaxUpdateDuration, d.d)
			bad = true
		}
	}
	if !bad {
		if u.HealthyDeadline > 0 && u.MinHealthyTime >= u.HealthyDeadline {
			add("min_healthy_time: must be less than healthy_deadline (%s), got %s", u.HealthyDeadline, u.MinHealthyTime)
		}
		if u.ProgressDeadline > 0 && u.HealthyDeadline >= u.ProgressDeadline {
			add("healthy_deadline: must be less than progress_deadline (%s), got %s", u.ProgressDeadline, u.HealthyDeadline)
		}
	}
	return p
}

// groupAsksForGPU reports whether a task of the group asks for a GPU.
func groupAsksForGPU(tg *TaskGroup) bool {
	for _, t := range tg.Tasks {
		if t == nil || t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if d == nil {
				continue
			}
			if _, typ, _, err := ParseDeviceName(d.Name); err == nil && typ == DeviceTypeGPU {
				return true
			}
		}
	}
	return false
}

// Deployment statuses, as Nomad's.
const (
	DeploymentStatusRunning    = "running"
	DeploymentStatusPaused     = "paused"
	DeploymentStatusFailed     = "failed"
	DeploymentStatusSuccessful = "successful"
	DeploymentStatusCancelled  = "cancelled"
)

// Deployment status descriptions, as Nomad's.
const (
	DeploymentStatusDescriptionRunning               = "Deployment is running"
	DeploymentStatusDescriptionRunningNeedsPromotion = "Deployment is running but requires manual promotion"
	DeploymentStatusDescriptionRunningAutoPromotion  = "Deployment is running pending automatic promotion"
	DeploymentStatusDescriptionPaused                = "Deployment is paused"
	DeploymentStatusDescriptionSuccessful            = "Deployment completed successfully"
	DeploymentStatusDescriptionStoppedJob            = "Cancelled because job is stopped"
	DeploymentStatusDescriptionNewerJob              = "Cancelled due to newer version of job"
	DeploymentStatusDescriptionFailedAllocations     = "Failed due to unhealthy allocations"
	DeploymentStatusDescriptionProgressDeadline      = "Failed due to progress deadline"
	DeploymentStatusDescriptionFailedByUser          = "Deployment marked as failed"
)

// DeploymentStatusDescriptionRollback is a failure's description when the
// deployment rolls back to version.
func DeploymentStatusDescriptionRollback(base string, version uint64) string {
	return fmt.Sprintf("%s - rolling back to job version %d", base, version)
}

// DeploymentStatusDescriptionSameSpec is a failure's description when
// auto_revert's stable version has the failed version's spec (Nomad's
// words).
func DeploymentStatusDescriptionSameSpec(base string, version uint64) string {
	return fmt.Sprintf("%s - not rolling back to stable job version %d as current job has same specification", base, version)
}

// DeploymentStatusDescriptionNoRollback is a failure's description when
// auto_revert found no stable version to go back to.
func DeploymentStatusDescriptionNoRollback(base string) string {
	return base + " - no stable job version to auto revert to"
}

// Deployment is the rollout of one job version (Nomad's Deployment).
type Deployment struct {
	ID        string
	Namespace string
	JobID     string
	// JobVersion, JobModifyIndex, JobSpecModifyIndex and JobCreateIndex
	// name the job version being deployed.
	JobVersion         uint64
	JobModifyIndex     uint64
	JobSpecModifyIndex uint64
	JobCreateIndex     uint64
	IsMultiregion      bool
	// TaskGroups holds the state of each group with an update strategy.
	TaskGroups        map[string]*DeploymentState
	Status            string
	StatusDescription string
	EvalPriority      int
	CreateIndex       uint64
	ModifyIndex       uint64
	// CreateTime and ModifyTime are Unix nanoseconds, set by the endpoint.
	CreateTime int64
	ModifyTime int64
}

// DeploymentState is one group's part of a deployment. The counters are
// derived by the state store from the deployment's allocations.
type DeploymentState struct {
	AutoRevert       bool
	AutoPromote      bool
	ProgressDeadline time.Duration
	// RequireProgressBy is when, Unix nanoseconds, the deployment fails
	// unless an allocation becomes healthy first: the latest placement or
	// health time of the group's allocations plus ProgressDeadline; 0
	// before any allocation is placed.
	RequireProgressBy int64
	Promoted          bool
	PlacedCanaries    []string
	DesiredCanaries   int
	DesiredTotal      int
	PlacedAllocs      int
	HealthyAllocs     int
	UnhealthyAllocs   int
}

// Copy returns a deep copy.
func (d *Deployment) Copy() *Deployment {
	if d == nil {
		return nil
	}
	c := *d
	if d.TaskGroups != nil {
		c.TaskGroups = make(map[string]*DeploymentState, len(d.TaskGroups))
		for k, s := range d.TaskGroups {
			if s == nil {
				continue
			}
			sc := *s
			sc.PlacedCanaries = append([]string(nil), s.PlacedCanaries...)
			c.TaskGroups[k] = &sc
		}
	}
	return &c
}

// Active reports whether the deployment is running or paused.
func (d *Deployment) Active() bool {
	return d != nil && (d.Status == DeploymentStatusRunning || d.Status == DeploymentStatusPaused)
}

// ForJob reports whether the deployment rolls out job's current version.
func (d *Deployment) ForJob(job *Job) bool {
	return d != nil && job != nil && d.JobID == job.ID && d.JobCreateIndex == job.CreateIndex && d.JobVersion == job.Version
}

// RequiresPromotion reports whether a group has canaries not yet promoted.
func (d *Deployment) RequiresPromotion() bool {
	for _, s := range d.TaskGroups {
		if s != nil && s.DesiredCanaries > 0 && !s.Promoted {
			return true
		}
	}
	return false
}

// AllocDeploymentStatus is an allocation's health within its deployment
// (Nomad's Allocation.DeploymentStatus): Healthy nil until the client (or
// a user, for manual health) decides; Timestamp when it did, Unix
// nanoseconds; Canary for a canary.
type AllocDeploymentStatus struct {
	Healthy   *bool
	Timestamp int64
	Canary    bool
}

// Copy returns a deep copy.
func (s *AllocDeploymentStatus) Copy() *AllocDeploymentStatus {
	if s == nil {
		return nil
	}
	c := *s
	if s.Healthy != nil {
		h := *s.Healthy
		c.Healthy = &h
	}
	return &c
}

// IsHealthy reports a set healthy verdict.
func (s *AllocDeploymentStatus) IsHealthy() bool { return s != nil && s.Healthy != nil && *s.Healthy }

// IsUnhealthy reports a set unhealthy verdict.
func (s *AllocDeploymentStatus) IsUnhealthy() bool {
	return s != nil && s.Healthy != nil && !*s.Healthy
}

// IsCanary reports a canary.
func (s *AllocDeploymentStatus) IsCanary() bool { return s != nil && s.Canary }

// DeploymentStatusUpdate changes a deployment's status.
type DeploymentStatusUpdate struct {
	DeploymentID      string
	Status            string
	StatusDescription string
}

// DeploymentStatusUpdateRequest (Raft DeploymentStatusUpdateRequestType)
// sets a deployment's status (fail, pause, resume, success), and in the
// same entry registers Job (an auto-revert) and creates Eval, each when
// set. A deployment that becomes successful marks its job version
// stable.
type DeploymentStatusUpdateRequest struct {
	DeploymentUpdate *DeploymentStatusUpdate
	Job              *Job
	Eval             *Evaluation
	// UpdatedAt is Unix nanoseconds, the deployment's ModifyTime.
	UpdatedAt int64
}

// DeploymentPromoteRequest (Raft DeploymentPromoteRequestType) promotes
// the canaries of the named groups (All: every group with canaries) and
// creates Eval.
type DeploymentPromoteRequest struct {
	DeploymentID string
	All          bool
	Groups       []string
	Eval         *Evaluation
	UpdatedAt    int64
}

// DeploymentAllocHealthRequest (Raft DeploymentAllocHealthRequestType)
// sets the health of allocations of a deployment (manual health, or the
// user's verdict), optionally with a status update, an auto-revert job and
// an evaluation.
type DeploymentAllocHealthRequest struct {
	DeploymentID           string
	HealthyAllocationIDs   []string
	UnhealthyAllocationIDs []string
	// Timestamp is when, Unix nanoseconds, the health was set.
	Timestamp        int64
	DeploymentUpdate *DeploymentStatusUpdate
	Job              *Job
	Eval             *Evaluation
}

// DeploymentPromoteArgs is what a user asks of a promotion (PUT
// /v1/deployment/promote/:id).
type DeploymentPromoteArgs struct {
	DeploymentID string
	All          bool
	Groups       []string
}

// DeploymentAllocHealthArgs is what a user asks of a health update (PUT
// /v1/deployment/allocation-health/:id).
type DeploymentAllocHealthArgs struct {
	DeploymentID           string
	HealthyAllocationIDs   []string
	UnhealthyAllocationIDs []string
}

// DeploymentUpdateResponse answers a deployment write.
type DeploymentUpdateResponse struct {
	EvalID                string
	EvalCreateIndex       uint64
	DeploymentModifyIndex uint64
	RevertedJobVersion    *uint64
	WriteMeta
}

// MaxDeploymentAllocHealthIDs bounds the allocation IDs of one health
// update.
const MaxDeploymentAllocHealthIDs = 10_000

// Evaluation triggers of deployments, as Nomad's.
const (
	EvalTriggerDeploymentWatcher = "deployment-watcher"
	EvalTriggerRollingUpdate     = "rolling-update"
)

// TaskGroupsHealthy sums HealthyAllocs over the groups.
func (d *Deployment) TaskGroupsHealthy() int {
	n := 0
	for _, s := range d.TaskGroups {
		if s != nil {
			n += s.HealthyAllocs
		}
	}
	return n
}

// allocDeploymentStatusJSON is AllocDeploymentStatus on the wire: Nomad's
// shape, with Timestamp as an RFC 3339 time (absent when zero).
type allocDeploymentStatusJSON struct {
	Healthy   *bool
	Timestamp *time.Time `json:",omitempty"`
	Canary    bool
}

// MarshalJSON renders Timestamp as RFC 3339, as Nomad's API does.
func (s AllocDeploymentStatus) MarshalJSON() ([]byte, error) {
	out := allocDeploymentStatusJSON{Healthy: s.Healthy, Canary: s.Canary}
	if s.Timestamp != 0 {
		t := time.Unix(0, s.Timestamp).UTC()
		out.Timestamp = &t
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *AllocDeploymentStatus) UnmarshalJSON(b []byte) error {
	var in allocDeploymentStatusJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*s = AllocDeploymentStatus{Healthy: in.Healthy, Canary: in.Canary}
	if in.Timestamp != nil && !in.Timestamp.IsZero() {
		s.Timestamp = in.Timestamp.UnixNano()
	}
	return nil
}
