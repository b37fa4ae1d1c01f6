package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Jobs is the client for the /v1/jobs and /v1/job/{id} routes.
type Jobs struct{ c *Client }

// Jobs returns the jobs endpoints.
func (c *Client) Jobs() *Jobs { return &Jobs{c: c} }

// JobRegisterRequest is the body of PUT /v1/jobs.
type JobRegisterRequest struct {
	Job *Job
}

// JobsParseRequest is the body of POST /v1/jobs/parse. Filename, when set,
// names the jobspec in error messages (default "job.hcl").
//
// Variables is sent as a JSON object of name to value. Nomad's client
// sends a string instead, the content of a variable file ("name =
// value" lines); decoding puts that in VariablesHCL. Canonicalize asks
// for the job with the server's defaults filled (Nomad's field).
type JobsParseRequest struct {
	JobHCL       string
	Variables    map[string]string `json:",omitempty"`
	VariablesHCL string            `json:"-"`
	Filename     string            `json:",omitempty"`
	Canonicalize bool              `json:",omitempty"`
}

// UnmarshalJSON decodes a JobsParseRequest whose Variables is an object
// (GPUlayer) or a string (Nomad's variable-file content).
func (p *JobsParseRequest) UnmarshalJSON(b []byte) error {
	type plain JobsParseRequest
	var v struct {
		plain
		Variables json.RawMessage
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = JobsParseRequest(v.plain)
	p.Variables, p.VariablesHCL = nil, ""
	raw := bytes.TrimSpace(v.Variables)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		return json.Unmarshal(raw, &p.VariablesHCL)
	default:
		if err := json.Unmarshal(raw, &p.Variables); err != nil {
			return fmt.Errorf("field Variables: want an object of strings or a variable file's text: %w", err)
		}
	}
	return nil
}

// Register submits job; the answer names the evaluation it created.
func (j *Jobs) Register(job *Job, w *WriteOptions) (*JobRegisterResponse, *WriteMeta, error) {
	var resp JobRegisterResponse
	wm, err := j.c.write(http.MethodPut, "/v1/jobs", nil, &JobRegisterRequest{Job: job}, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	if wm.LastIndex == 0 {
		wm.LastIndex = resp.Index
	}
	return &resp, wm, nil
}

// Parse asks the agent to parse a jobspec in HCL into a job.
func (j *Jobs) Parse(hcl string) (*Job, error) {
	return j.ParseWithVars(hcl, nil)
}

// ParseWithVars is Parse with values for the jobspec's variables.
func (j *Jobs) ParseWithVars(hcl string, vars map[string]string) (*Job, error) {
	var job Job
	if _, err := j.c.write(http.MethodPost, "/v1/jobs/parse", nil, &JobsParseRequest{JobHCL: hcl, Variables: vars}, &job, nil); err != nil {
		return nil, err
	}
	return &job, nil
}

// List returns the jobs, filtered by q.Prefix.
func (j *Jobs) List(q *QueryOptions) ([]*JobListStub, *QueryMeta, error) {
	var out []*JobListStub
	qm, err := j.c.query("/v1/jobs", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Info returns the job with the given ID.
func (j *Jobs) Info(id string, q *QueryOptions) (*Job, *QueryMeta, error) {
	var out Job
	qm, err := j.c.query("/v1/job/"+url.PathEscape(id), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}

// Allocations returns the job's allocations.
func (j *Jobs) Allocations(id string, q *QueryOptions) ([]*Allocation, *QueryMeta, error) {
	var out []*Allocation
	qm, err := j.c.query("/v1/job/"+url.PathEscape(id)+"/allocations", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Evaluations returns the job's evaluations.
func (j *Jobs) Evaluations(id string, q *QueryOptions) ([]*Evaluation, *QueryMeta, error) {
	var out []*Evaluation
	qm, err := j.c.query("/v1/job/"+url.PathEscape(id)+"/evaluations", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Deregister stops the job (and removes it when purge is true); it returns
// the ID of the evaluation that stops its allocations.
func (j *Jobs) Deregister(id string, purge bool, w *WriteOptions) (string, *WriteMeta, error) {
	params := url.Values{}
	if purge {
		params.Set("purge", strconv.FormatBool(purge))
	}
	var resp JobDeregisterResponse
	wm, err := j.c.write(http.MethodDelete, "/v1/job/"+url.PathEscape(id), params, nil, &resp, w)
	if err != nil {
		return "", nil, err
	}
	if wm.LastIndex == 0 {
		wm.LastIndex = resp.Index
	}
	return resp.EvalID, wm, nil
}
