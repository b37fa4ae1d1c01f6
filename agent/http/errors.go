package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/gpulayer/gpulayer/structs"
)

// codedError is an error raised by the HTTP layer itself (a bad parameter,
// a body too large) that carries its status code.
type codedError struct {
	code int
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// badRequest returns a 400 error with a formatted message.
func badRequest(format string, a ...any) error {
	return &codedError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// routeError describes a request the mux did not route.
func routeError(status int, r *http.Request) error {
	switch status {
	case http.StatusMethodNotAllowed:
		return &codedError{code: status, msg: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)}
	case http.StatusNotFound, 0:
		return &codedError{code: http.StatusNotFound, msg: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)}
	default:
		return &codedError{code: status, msg: http.StatusText(status)}
	}
}

// statusFor maps an error to an HTTP status: the layer's own codes first,
// then the structs sentinels by errors.Is, else 500.
func statusFor(err error) int {
	var ce *codedError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, structs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, structs.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, structs.ErrPermissionDenied):
		return http.StatusForbidden
	case errors.Is(err, structs.ErrEndpointConflict):
		return http.StatusConflict
	case errors.Is(err, structs.ErrOutcomeUnknown):
		return http.StatusGatewayTimeout
	case errors.Is(err, structs.ErrNotLeader), errors.Is(err, structs.ErrNoLeader), errors.Is(err, structs.ErrNotReady):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// errorResponse is the JSON body of every error answer.
type errorResponse struct {
	Error string `json:"error"`
}

// writeError answers with the status for err and {"error": "..."}. Server
// errors (5xx) are logged at warn level.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusFor(err)
	if code >= 500 {
		h.logger.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
	}
	writeJSON(w, code, errorResponse{Error: err.Error()})
}

// writeJSON answers with code and v encoded as indented JSON.
func writeJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// The status is sent; an encode error can only be a broken connection.
	_ = enc.Encode(v)
}

// MaxJSONBodyDepth is the deepest nesting of arrays and objects a JSON
// request body may have. A job register body nests about 10 levels before
// a task's driver Config (JobRegisterRequest, Job, TaskGroups, a group,
// Tasks, a task, Resources, Devices, a device, Constraints), which leaves a
// driver config some 50 levels; encoding/json's own limit (10000) would let
// a 1 MiB body build values that every later walk recurses through.
const MaxJSONBodyDepth = 64

// decodeBody reads a JSON request body of at most maxBody bytes into v. A
// body too large yields an *http.MaxBytesError (413); an empty or malformed
// body, or one nested deeper than MaxJSONBodyDepth, a 400 error naming the
// problem.
func (h *handler) decodeBody(w http.ResponseWriter, r *http.Request, v interface{}) error {
	_, err := h.decodeBodyRaw(w, r, v)
	return err
}

// decodeBodyRaw is decodeBody that also returns the body's bytes.
func (h *handler) decodeBodyRaw(w http.ResponseWriter, r *http.Request, v interface{}) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, h.maxBody)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("request body larger than %d bytes: %w", mbe.Limit, err)
		}
		return nil, badRequest("reading request body: %v", err)
	}
	if off := jobspec.JSONTooDeep(raw, MaxJSONBodyDepth); off >= 0 {
		return nil, badRequest("malformed JSON body: nested deeper than %d levels at byte %d", MaxJSONBodyDepth, off)
	}
	return raw, decodeRaw(raw, v)
}

// decodeRaw decodes the JSON document raw into v, refusing trailing data.
func decodeRaw(raw []byte, v interface{}) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; want a JSON object")
		case errors.As(err, &se):
			return badRequest("malformed JSON body at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return badRequest("malformed JSON body: field %q: cannot use a JSON %s as %s", te.Field, te.Value, te.Type)
		default:
			return badRequest("malformed JSON body: %v", err)
		}
	}
	// Trailing data after the object is also malformed.
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return badRequest("malformed JSON body: data after the JSON object")
	}
	return nil
}

// decodeJobRequest decodes the body of a job register or plan request and
// checks its fields against the wire types (api.CheckFields): a field
// GPUlayer does not support that carries a value is a 400 naming it, an
// unknown one a warning returned for the answer's Warnings. The job's
// Region must be empty or GPUlayer's one region; its NodePool is checked
// by the server (the pool must exist).
func (h *handler) decodeJobRequest(w http.ResponseWriter, r *http.Request) (*api.JobRegisterRequest, []string, error) {
	var req api.JobRegisterRequest
	raw, err := h.decodeBodyRaw(w, r, &req)
	if err != nil {
		return nil, nil, err
	}
	warnings, err := api.CheckFields(raw, &req, "")
	if err != nil {
		return nil, nil, badRequest("%v", err)
	}
	if req.Job == nil {
		return nil, nil, badRequest("request body has no Job; want {\"Job\": {...}}")
	}
	if reg := req.Job.Region; reg != "" && reg != h.region {
		return nil, nil, badRequest("Job.Region %q: not supported by GPUlayer: this cluster has one region, %q", reg, h.region)
	}
	return &req, warnings, nil
}
