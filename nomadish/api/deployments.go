package api

import (
	"net/http"
	"net/url"
	"time"
)

// Deployment statuses.
const (
	DeploymentStatusRunning    = "running"
	DeploymentStatusPaused     = "paused"
	DeploymentStatusFailed     = "failed"
	DeploymentStatusSuccessful = "successful"
	DeploymentStatusCancelled  = "cancelled"
)

// UpdateStrategy is a group's (or, as the default of its groups, a
// job's) update block: how a new version rolls out. Durations are
// nanoseconds in JSON, as Nomad's.
type UpdateStrategy struct {
	MaxParallel      int
	HealthCheck      string
	MinHealthyTime   time.Duration
	HealthyDeadline  time.Duration
	ProgressDeadline time.Duration
	AutoRevert       bool
	AutoPromote      bool
	Canary           int
	// MaxUnavailable, when 0, places each new allocation beside the old
	// one and stops the old one only once the new one is healthy; nil
	// stops first (GPUlayer's addition).
	MaxUnavailable *int `json:",omitempty"`
}

// Deployment is the rollout of one job version (Nomad's shape).
type Deployment struct {
	ID                 string
	Namespace          string
	JobID              string
	JobVersion         uint64
	JobModifyIndex     uint64
	JobSpecModifyIndex uint64
	JobCreateIndex     uint64
	IsMultiregion      bool
	TaskGroups         map[string]*DeploymentState
	Status             string
	StatusDescription  string
	CreateIndex        uint64
	ModifyIndex        uint64
	// CreateTime and ModifyTime are Unix nanoseconds.
	CreateTime int64
	ModifyTime int64
}

// DeploymentState is one group's part of a deployment.
type DeploymentState struct {
	PlacedCanaries    []string
	AutoRevert        bool
	ProgressDeadline  time.Duration
	RequireProgressBy time.Time
	Promoted          bool
	DesiredCanaries   int
	DesiredTotal      int
	PlacedAllocs      int
	HealthyAllocs     int
	UnhealthyAllocs   int
	AutoPromote       bool
}

// AllocDeploymentStatus is an allocation's health in its deployment.
type AllocDeploymentStatus struct {
	Healthy     *bool
	Timestamp   time.Time
	Canary      bool
	ModifyIndex uint64
}

// DeploymentUpdateResponse answers a deployment write.
type DeploymentUpdateResponse struct {
	EvalID                string
	EvalCreateIndex       uint64
	DeploymentModifyIndex uint64
	RevertedJobVersion    *uint64
	Index                 uint64
}

// DeploymentPromoteRequest is the body of PUT /v1/deployment/promote/{id}.
type DeploymentPromoteRequest struct {
	DeploymentID string
	All          bool
	Groups       []string
}

// DeploymentFailRequest is the body of PUT /v1/deployment/fail/{id}.
type DeploymentFailRequest struct {
	DeploymentID string
}

// DeploymentPauseRequest is the body of PUT /v1/deployment/pause/{id}.
type DeploymentPauseRequest struct {
	DeploymentID string
	Pause        bool
}

// DeploymentAllocHealthRequest is the body of PUT
// /v1/deployment/allocation-health/{id}.
type DeploymentAllocHealthRequest struct {
	DeploymentID           string
	HealthyAllocationIDs   []string
	UnhealthyAllocationIDs []string
}

// Deployments is the client for the /v1/deployment routes.
type Deployments struct{ c *Client }

// Deployments returns the deployment endpoints.
func (c *Client) Deployments() *Deployments { return &Deployments{c: c} }

// List returns the deployments, filtered by q.Prefix (of the ID).
func (d *Deployments) List(q *QueryOptions) ([]*Deployment, *QueryMeta, error) {
	var out []*Deployment
	qm, err := d.c.query("/v1/deployments", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Info returns one deployment.
func (d *Deployments) Info(id string, q *QueryOptions) (*Deployment, *QueryMeta, error) {
	var out Deployment
	qm, err := d.c.query("/v1/deployment/"+url.PathEscape(id), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Allocations returns the deployment's allocations.
func (d *Deployments) Allocations(id string, q *QueryOptions) ([]*Allocation, *QueryMeta, error) {
	var out []*Allocation
	qm, err := d.c.query("/v1/deployment/allocations/"+url.PathEscape(id), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

func (d *Deployments) write(path, id string, body interface{}, w *WriteOptions) (*DeploymentUpdateResponse, *WriteMeta, error) {
	var resp DeploymentUpdateResponse
	wm, err := d.c.write(http.MethodPut, path+url.PathEscape(id), nil, body, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	if wm.LastIndex == 0 {
		wm.LastIndex = resp.Index
	}
	return &resp, wm, nil
}

// PromoteAll promotes the canaries of every group of the deployment.
func (d *Deployments) PromoteAll(id string, w *WriteOptions) (*DeploymentUpdateResponse, *WriteMeta, error) {
	return d.write("/v1/deployment/promote/", id, &DeploymentPromoteRequest{DeploymentID: id, All: true}, w)
}

// PromoteGroups promotes the canaries of the named groups.
func (d *Deployments) PromoteGroups(id string, groups []string, w *WriteOptions) (*DeploymentUpdateResponse, *WriteMeta, error) {
	return d.write("/v1/deployment/promote/", id, &DeploymentPromoteRequest{DeploymentID: id, Groups: groups}, w)
}

// Fail marks the deployment failed (auto_revert then rolls back).
func (d *Deployments) Fail(id string, w *WriteOptions) (*DeploymentUpdateResponse, *WriteMeta, error) {
	return d.write("/v1/deployment/fail/", id, &DeploymentFailRequest{DeploymentID: id}, w)
}

// Pause pauses (pause true) or resumes the deployment.
func (d *Deployments) Pause(id string, pause bool, w *WriteOptions) (*DeploymentUpdateResponse, *WriteMeta, error) {
	return d.write("/v1/deployment/pause/", id, &DeploymentPauseRequest{DeploymentID: id, Pause: pause}, w)
}

// SetAllocHealth sets the health of allocations of a deployment whose
// groups use health_check = "manual".
func (d *Deployments) SetAllocHealth(id string, healthy, unhealthy []string, w *WriteOptions) (*DeploymentUpdateResponse, *WriteMeta, error) {
	return d.write("/v1/deployment/allocation-health/", id,
		&DeploymentAllocHealthRequest{DeploymentID: id, HealthyAllocationIDs: healthy, UnhealthyAllocationIDs: unhealthy}, w)
}

// Deployments returns the job's deployments, newest first.
func (j *Jobs) Deployments(id string, q *QueryOptions) ([]*Deployment, *QueryMeta, error) {
	var out []*Deployment
	qm, err := j.c.query("/v1/job/"+url.PathEscape(id)+"/deployments", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// LatestDeployment returns the job's newest deployment, nil when it has
// none.
func (j *Jobs) LatestDeployment(id string, q *QueryOptions) (*Deployment, *QueryMeta, error) {
	var out *Deployment
	qm, err := j.c.query("/v1/job/"+url.PathEscape(id)+"/deployment", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}
