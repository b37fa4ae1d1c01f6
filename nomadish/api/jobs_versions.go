package api

import (
	"net/http"
	"net/url"
)

// JobVersionsResponse is the answer of GET /v1/job/{id}/versions: the kept
// versions, newest first, and with ?diffs=true Diffs[i], what changed from
// Versions[i+1] to Versions[i] (Nomad's shape).
type JobVersionsResponse struct {
	Versions []*Job
	Diffs    []*JobDiff
}

// FieldDiff is one changed value: Type "Added", "Deleted" or "Edited",
// Old and New as JSON text.
type FieldDiff struct {
	Type        string
	Name        string
	Old, New    string
	Annotations []string
}

// ObjectDiff is Nomad's diff of a nested object (unused by GPUlayer's
// flat diffs, kept for the shape).
type ObjectDiff struct {
	Type    string
	Name    string
	Fields  []*FieldDiff
	Objects []*ObjectDiff
}

// JobRevertRequest is the body of PUT /v1/job/{id}/revert: register
// JobVersion again as a new version; with EnforcePriorVersion set, only
// while the current version is that number.
type JobRevertRequest struct {
	JobID               string
	JobVersion          uint64
	EnforcePriorVersion *uint64 `json:",omitempty"`
}

// JobStabilityRequest is the body of PUT /v1/job/{id}/stable.
type JobStabilityRequest struct {
	JobID      string
	JobVersion uint64
	Stable     bool
}

// JobStabilityResponse answers PUT /v1/job/{id}/stable; Index is the Raft
// index of the change.
type JobStabilityResponse struct {
	Index uint64
}

// Versions returns the kept versions of the job, newest first, and with
// diffs the changes between each and the one before it.
func (j *Jobs) Versions(id string, diffs bool, q *QueryOptions) ([]*Job, []*JobDiff, *QueryMeta, error) {
	var out JobVersionsResponse
	qq := QueryOptions{}
	if q != nil {
		qq = *q
	}
	if diffs {
		params := map[string]string{"diffs": "true"}
		for k, v := range qq.Params {
			params[k] = v
		}
		qq.Params = params
	}
	qm, err := j.c.query("/v1/job/"+url.PathEscape(id)+"/versions", &out, &qq)
	if err != nil {
		return nil, nil, nil, err
	}
	return out.Versions, out.Diffs, qm, nil
}

// Revert registers version of the job again (as a new version); with
// enforcePriorVersion set, only while the current version is that number.
func (j *Jobs) Revert(id string, version uint64, enforcePriorVersion *uint64, w *WriteOptions) (*JobRegisterResponse, *WriteMeta, error) {
	var resp JobRegisterResponse
	body := &JobRevertRequest{JobID: id, JobVersion: version, EnforcePriorVersion: enforcePriorVersion}
	wm, err := j.c.write(http.MethodPut, "/v1/job/"+url.PathEscape(id)+"/revert", nil, body, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	if wm.LastIndex == 0 {
		wm.LastIndex = resp.Index
	}
	return &resp, wm, nil
}

// Stable marks version of the job stable or not.
func (j *Jobs) Stable(id string, version uint64, stable bool, w *WriteOptions) (*JobStabilityResponse, *WriteMeta, error) {
	var resp JobStabilityResponse
	body := &JobStabilityRequest{JobID: id, JobVersion: version, Stable: stable}
	wm, err := j.c.write(http.MethodPut, "/v1/job/"+url.PathEscape(id)+"/stable", nil, body, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}
