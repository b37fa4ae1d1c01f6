package api

import (
	"net/http"
	"net/url"
)

// PeriodicConfig is a job's periodic block (Nomad's shape): the servers
// launch a child "<job>/periodic-<unix>" at each time the crons name.
type PeriodicConfig struct {
	// Enabled launches children on schedule; nil (left out) is true, as
	// Nomad's Canonicalize makes it.
	Enabled *bool `json:",omitempty"`
	// Spec is the older singular `cron`; Specs is `crons`.
	Spec  string   `json:",omitempty"`
	Specs []string `json:",omitempty"`
	// SpecType is "cron".
	SpecType string
	// ProhibitOverlap skips a launch while a child is still running.
	ProhibitOverlap bool
	// TimeZone is an IANA zone the crons are read in; empty is UTC.
	TimeZone string `json:",omitempty"`
}

// ParameterizedJobConfig is a job's parameterized block (Nomad's shape).
type ParameterizedJobConfig struct {
	// Payload is "optional", "required" or "forbidden".
	Payload      string
	MetaRequired []string `json:",omitempty"`
	MetaOptional []string `json:",omitempty"`
}

// DispatchPayloadConfig is a task's dispatch_payload block: the payload is
// written to File beneath the task's local/ directory.
type DispatchPayloadConfig struct {
	File string
}

// JobDispatchRequest is the body of PUT /v1/job/{id}/dispatch. Payload is
// at most 16 KiB (base64 in JSON).
type JobDispatchRequest struct {
	JobID            string            `json:",omitempty"`
	Payload          []byte            `json:",omitempty"`
	Meta             map[string]string `json:",omitempty"`
	IdempotencyToken string            `json:",omitempty"`
	// IdPrefixTemplate is Nomad's; GPUlayer refuses a non-empty one.
	IdPrefixTemplate string `json:",omitempty"`
}

// JobDispatchResponse answers a dispatch. EvalID is empty when the child
// is held by max_running_children or the token named an existing child.
type JobDispatchResponse struct {
	DispatchedJobID string
	EvalID          string
	EvalCreateIndex uint64
	JobCreateIndex  uint64
	Index           uint64
}

// PeriodicForceResponse answers PUT /v1/job/{id}/periodic/force.
type PeriodicForceResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	Index           uint64
}

// Dispatch creates a child of the parameterized job id with payload and
// meta; a non-empty token makes a repeated call return the same child.
func (j *Jobs) Dispatch(id string, meta map[string]string, payload []byte, token string, w *WriteOptions) (*JobDispatchResponse, *WriteMeta, error) {
	var resp JobDispatchResponse
	req := &JobDispatchRequest{JobID: id, Meta: meta, Payload: payload, IdempotencyToken: token}
	wm, err := j.c.write(http.MethodPut, "/v1/job/"+url.PathEscape(id)+"/dispatch", nil, req, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}

// PeriodicForce launches a child of the periodic job id now.
func (j *Jobs) PeriodicForce(id string, w *WriteOptions) (*PeriodicForceResponse, *WriteMeta, error) {
	var resp PeriodicForceResponse
	wm, err := j.c.write(http.MethodPut, "/v1/job/"+url.PathEscape(id)+"/periodic/force", nil, nil, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}

// MaxDispatchPayload is the largest dispatch payload the servers accept:
// 16 KiB, as in Nomad.
const MaxDispatchPayload = 16 * 1024
