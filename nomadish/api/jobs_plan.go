package api

import (
	"errors"
	"net/http"
	"net/url"
)

// JobPlanResponse is what registering a job would do (PUT
// /v1/job/{id}/plan); nothing is changed.
//
// Diff, Annotations and FailedTGAllocs are Nomad's fields; DiffLines,
// Groups and Preemptions say the same in GPUlayer's words.
type JobPlanResponse struct {
	// JobModifyIndex is the running version's, 0 for a new job.
	JobModifyIndex uint64
	// Diff is Nomad's structured diff: Type "Added", "Edited" or "None",
	// with one TaskGroupDiff per group carrying its update counts.
	Diff *JobDiff
	// Annotations counts, per task group, the placements, stops and
	// in-place updates (Nomad's DesiredTGUpdates).
	Annotations *PlanAnnotations
	// FailedTGAllocs explains, per task group, why placements would fail.
	FailedTGAllocs map[string]*AllocMetric `json:",omitempty"`
	// DiffLines lists changes against the running version: "+ path =
	// value", "- path = value", "~ path: old => new".
	DiffLines []string
	// Groups tells, per task group, where allocations would go or why not.
	Groups []*GroupPlan
	// Preemptions names other jobs' allocations that would be evicted.
	Preemptions []string
	// Warnings names request fields GPUlayer ignored, one per line.
	Warnings string
}

// JobDiff is Nomad's job diff, reduced to what GPUlayer computes: the
// kind of change and, per group, its update counts (job plan), or every
// changed value in Fields, named by its path (job versions, see
// jobs_versions.go).
type JobDiff struct {
	Type       string
	ID         string
	Fields     []*FieldDiff  `json:",omitempty"`
	Objects    []*ObjectDiff `json:",omitempty"`
	TaskGroups []*TaskGroupDiff
}

// TaskGroupDiff is one group's part of a JobDiff: Updates counts
// "create", "destroy" and "in-place update".
type TaskGroupDiff struct {
	Type    string
	Name    string
	Updates map[string]uint64
}

// PlanAnnotations is Nomad's plan annotations: per task group, what the
// scheduler would do.
type PlanAnnotations struct {
	DesiredTGUpdates map[string]*DesiredUpdates
}

// DesiredUpdates counts one group's planned changes.
type DesiredUpdates struct {
	Ignore        uint64
	Place         uint64
	Stop          uint64
	InPlaceUpdate uint64
	Preemptions   uint64
}

// GroupPlan is the planned outcome of one task group.
type GroupPlan struct {
	Name                 string
	Place, Stop, InPlace int
	// Nodes counts placements per node name.
	Nodes map[string]int
	// Queued counts allocations that would wait; Failure says why.
	Queued  int
	Failure *AllocMetric
	// Notes say how the group's update block rolls the change out (one
	// at a time, canaries, new copies first) and what waits for room.
	Notes []string `json:",omitempty"`
}

// JobQueueEntry is a job with work waiting to be placed (GET
// /v1/jobs/queue), listed in placement order: priority, then submit time.
type JobQueueEntry struct {
	JobID      string
	Namespace  string
	Type       string
	Priority   int
	SubmitTime int64
	EvalID     string
	// Status is "blocked" (no room yet) or "pending" (waiting for a
	// scheduler).
	Status  string
	Queued  map[string]int
	Reasons map[string]string
}

// ErrEmptyJobID is returned by Jobs.Plan for a job without an ID.
var ErrEmptyJobID = errors.New("invalid job: ID: must not be empty (name the job, as in job \"train\" { ... })")

// Plan asks what registering job would do, without doing it. A job
// without an ID is refused here, with ErrEmptyJobID, since the route
// names the job: the server's register would refuse it too.
func (j *Jobs) Plan(job *Job) (*JobPlanResponse, error) {
	if job == nil || job.ID == "" {
		return nil, ErrEmptyJobID
	}
	var out JobPlanResponse
	if _, err := j.c.write(http.MethodPut, "/v1/job/"+url.PathEscape(job.ID)+"/plan", nil, &JobRegisterRequest{Job: job}, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// Queue lists the jobs with work waiting to be placed, in placement order.
func (j *Jobs) Queue(q *QueryOptions) ([]*JobQueueEntry, *QueryMeta, error) {
	var out []*JobQueueEntry
	qm, err := j.c.query("/v1/jobs/queue", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}
