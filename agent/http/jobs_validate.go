package http

import (
	"errors"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// validateRoutes registers job validation (Nomad's /v1/validate/job).
func (h *handler) validateRoutes() {
	h.handle("PUT /v1/validate/job", h.jobValidate)
	h.handle("POST /v1/validate/job", h.jobValidate)
}

// jobValidate handles PUT /v1/validate/job with {"Job": {...}}: the job is
// canonicalized and validated as a registration would be, and the problems
// are answered (200, Nomad's JobValidateResponse); nothing is stored. A
// body that does not decode, or holds a field GPUlayer refuses, is 400. The
// caller needs read-job in the job's namespace.
func (h *handler) jobValidate(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	req, warnings, err := h.decodeJobRequest(w, r)
	if err != nil {
		return nil, err
	}
	acl, _ := aclFrom(r)
	if !acl.IsManagement() && !acl.AllowNamespaceOp(nsOrDefault(req.Job.Namespace), structs.NamespaceCapabilityReadJob) {
		return nil, errPermissionDenied
	}
	job := convert.JobToStructs(req.Job)
	job.Canonicalize()
	out := &api.JobValidateResponse{DriverConfigValidated: true, Warnings: joinWarnings("", warnings)}
	if err := job.Validate(); err != nil {
		out.Error = err.Error()
		var ve *structs.ValidationError
		if errors.As(err, &ve) {
			out.ValidationErrors = append([]string(nil), ve.Problems...)
		} else {
			out.ValidationErrors = []string{err.Error()}
		}
	}
	return out, nil
}
