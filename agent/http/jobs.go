package http

import (
	"errors"
	"net/http"
	"strings"
	"unicode"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/gpulayer/gpulayer/structs"
)

// defaultParseFilename names a jobspec sent to /v1/jobs/parse without a
// Filename, in error messages.
const defaultParseFilename = "job.hcl"

// maxParseFilename bounds the Filename of a parse request, in bytes.
const maxParseFilename = 256

// jobRegister handles PUT|POST /v1/jobs with {"Job": {...}}.
func (h *handler) jobRegister(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	req, warnings, err := h.decodeJobRequest(w, r)
	if err != nil {
		return nil, err
	}
	if err := h.checkJobSubmit(r, req.Job.ID, req.Job.Namespace); err != nil {
		return nil, err
	}
	job := convert.JobToStructs(req.Job)
	if err := h.referenceJobArtifacts(r, job); err != nil {
		return nil, err
	}
	resp, err := h.srv.JobRegister(r.Context(), job)
	if err != nil {
		return nil, err
	}
	setIndex(w, resp.Index)
	out := convert.RegisterResponseRead(resp)
	out.Warnings = joinWarnings(out.Warnings, warnings)
	return out, nil
}

// joinWarnings adds the request's field warnings to a response's
// Warnings text, one per line.
func joinWarnings(have string, more []string) string {
	all := more
	if have != "" {
		all = append([]string{have}, more...)
	}
	return strings.Join(all, "\n")
}

// jobParse handles POST /v1/jobs/parse with {"JobHCL": "...",
// "Variables": {...}, "Filename": "..."} and answers the parsed job. A parse
// error is 400 with "file:line:col: message" lines.
func (h *handler) jobParse(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	var req api.JobsParseRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if req.JobHCL == "" {
		return nil, badRequest("request body has no JobHCL; want {\"JobHCL\": \"job \\\"x\\\" {...}\"}")
	}
	name := req.Filename
	if name == "" {
		name = defaultParseFilename
	}
	// The name starts every diagnostic line of the answer: a long one
	// would multiply its size by the number of diagnostics.
	if len(name) > maxParseFilename || strings.ContainsFunc(name, unicode.IsControl) {
		return nil, badRequest("Filename: at most %d bytes without control characters, got %d bytes", maxParseFilename, len(name))
	}
	vars := req.Variables
	if req.VariablesHCL != "" {
		if len(req.VariablesHCL) > 1<<20 {
			return nil, badRequest("Variables larger than 1 MiB")
		}
		fileVars, err := jobspec.ParseVarSource("variables.hcl", []byte(req.VariablesHCL))
		if err != nil {
			return nil, badRequest("Variables: %v", err)
		}
		vars = fileVars
	}
	job, err := jobspec.Parse(name, []byte(req.JobHCL), vars)
	if err != nil {
		var perr *jobspec.Error
		if errors.As(err, &perr) {
			return nil, badRequest("%s", perr.Error())
		}
		return nil, badRequest("parse %s: %v", name, err)
	}
	if req.Canonicalize {
		sj := convert.JobToStructs(job)
		sj.Canonicalize()
		return convert.JobRead(sj, h.region), nil
	}
	return job, nil
}

// jobList handles GET /v1/jobs (?prefix, blocking).
func (h *handler) jobList(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	jobs, meta, err := h.srv.JobList(r.Context(), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	jobs = visible(r, jobs, structs.NamespaceCapabilityListJobs, func(j *structs.Job) string { return j.Namespace })
	// One read of the allocations for every summary.
	allocs, _, err := h.srv.AllocList(r.Context(), &structs.QueryOptions{AllowStale: q.AllowStale})
	if err != nil {
		return nil, err
	}
	byJob := map[string][]*structs.Allocation{}
	for _, a := range allocs {
		byJob[a.Namespace+"\x00"+a.JobID] = append(byJob[a.Namespace+"\x00"+a.JobID], a)
	}
	out := make([]*api.JobListStub, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, convert.JobListStub(j, convert.JobSummary(j, byJob[j.Namespace+"\x00"+j.ID])))
	}
	return out, nil
}

// jobSummary handles GET /v1/job/{id}/summary (blocking on the job): the
// job's allocations counted per task group and client status, Queued from
// the newest evaluation's queued allocations.
func (h *handler) jobSummary(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	job, meta, err := h.srv.JobGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	now := &structs.QueryOptions{AllowStale: q.AllowStale}
	allocs, ameta, err := h.srv.JobAllocations(r.Context(), job.ID, now)
	if err != nil {
		return nil, err
	}
	evals, emeta, err := h.srv.JobEvaluations(r.Context(), job.ID, now)
	if err != nil {
		return nil, err
	}
	meta.Index = max(meta.Index, ameta.Index, emeta.Index)
	setMeta(w, meta)
	s := convert.JobSummary(job, allocs)
	var newest *structs.Evaluation
	for _, e := range evals {
		if newest == nil || e.CreateIndex > newest.CreateIndex {
			newest = e
		}
	}
	if newest != nil {
		for g, n := range newest.QueuedAllocations {
			if tg, ok := s.Summary[g]; ok {
				tg.Queued = n
				s.Summary[g] = tg
			}
		}
	}
	if job.Periodic != nil || job.ParameterizedJob != nil {
		children, _, err := h.srv.JobList(r.Context(), &structs.QueryOptions{AllowStale: q.AllowStale, Prefix: job.ID + "/"})
		if err != nil {
			return nil, err
		}
		s.Children = childrenSummary(job, children)
	}
	return s, nil
}

// childrenSummary counts the children of parent among jobs by status,
// as Nomad's JobChildrenSummary does: pending, running, dead.
func childrenSummary(parent *structs.Job, jobs []*structs.Job) *api.JobChildrenSummary {
	out := &api.JobChildrenSummary{}
	for _, c := range jobs {
		if c.ParentID != parent.ID || c.Namespace != parent.Namespace {
			continue
		}
		switch c.Status {
		case structs.JobStatusRunning:
			out.Running++
		case structs.JobStatusDead:
			out.Dead++
		default:
			out.Pending++
		}
	}
	return out
}

// jobGet handles GET /v1/job/{id} (blocking).
func (h *handler) jobGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	job, meta, err := h.srv.JobGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return convert.JobRead(job, h.region), nil
}

// jobDeregister handles DELETE /v1/job/{id} (?purge=true).
func (h *handler) jobDeregister(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	purge, err := parseBool(r, "purge")
	if err != nil {
		return nil, err
	}
	resp, err := h.srv.JobDeregister(r.Context(), r.PathValue("id"), purge)
	if err != nil {
		return nil, err
	}
	setIndex(w, resp.Index)
	return convert.DeregisterResponseRead(resp), nil
}

// jobAllocations handles GET /v1/job/{id}/allocations (blocking).
func (h *handler) jobAllocations(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	allocs, meta, err := h.srv.JobAllocations(r.Context(), r.PathValue("id"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return h.allocStubs(allocs), nil
}

// jobEvaluations handles GET /v1/job/{id}/evaluations (blocking).
func (h *handler) jobEvaluations(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	evals, meta, err := h.srv.JobEvaluations(r.Context(), r.PathValue("id"), q)
	if err != nil {
		return nil, err
	}
	setMeta(w, meta)
	return evalsRead(evals), nil
}

// nonNil returns s, or an empty slice for nil, so lists encode as [] and
// never as null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
