package api

import "net/http"

// JobValidateRequest is the body of PUT /v1/validate/job (Nomad's shape).
type JobValidateRequest struct {
	Job *Job
}

// JobValidateResponse is the answer of PUT /v1/validate/job (Nomad's
// shape): the problems the server's validation finds, nothing changed.
type JobValidateResponse struct {
	// DriverConfigValidated is true: each task's driver config was
	// checked with the rest.
	DriverConfigValidated bool
	// ValidationErrors lists one problem per entry, each naming its
	// field (`group "llm": endpoint: port: must be 1-65535, got 0`).
	ValidationErrors []string
	// Error is the problems in one message, "" for a valid job.
	Error string
	// Warnings names request fields GPUlayer ignored, one per line.
	Warnings string
}

// Validate asks the server to validate job without registering it. A job
// that fails validation is not an error: its problems are in the answer.
func (j *Jobs) Validate(job *Job) (*JobValidateResponse, error) {
	var out JobValidateResponse
	if _, err := j.c.write(http.MethodPut, "/v1/validate/job", nil, &JobValidateRequest{Job: job}, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
