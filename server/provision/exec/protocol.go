package exec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/server/provision"
)

// ProtocolVersion is the version of the JSON protocol, sent as
// "protocol" in every request and as GPULAYER_PROVIDER_PROTOCOL.
const ProtocolVersion = 1

// The ops, the program's first argument.
const (
	OpCreate    = "create"
	OpTerminate = "terminate"
	OpList      = "list"
)

// Bounds on what a program may answer.
const (
	MaxIDLen       = 256
	MaxNodeNameLen = 128
	MaxStateLen    = 64
	MaxListHosts   = 10000
)

// Shape is a NodeShape on the wire.
type Shape struct {
	NodeClass    string `json:"node_class"`
	GPUModel     string `json:"gpu_model"`
	GPUCount     int    `json:"gpu_count"`
	GPUMemoryMB  int    `json:"gpu_memory_mb"`
	MemoryModel  string `json:"memory_model"`
	Availability string `json:"availability"`
}

// Join is a JoinInfo on the wire: how the host's agent reaches the
// cluster. Token is the only secret a program is given.
type Join struct {
	Servers    []string `json:"servers"`
	Token      string   `json:"token"`
	Region     string   `json:"region"`
	Datacenter string   `json:"datacenter"`
}

// CreateRequest is the stdin of `<command> create`.
type CreateRequest struct {
	Protocol       int               `json:"protocol"`
	Op             string            `json:"op"`
	Pool           string            `json:"pool"`
	IdempotencyKey string            `json:"idempotency_key"`
	NodeName       string            `json:"node_name"`
	Shape          Shape             `json:"shape"`
	Config         map[string]string `json:"config"`
	Join           Join              `json:"join"`
}

// CreateResponse is the stdout of `<command> create`: the host's id
// (required), the node name its agent registers as (default: the
// request's) and the provider's word for its state. Pool and
// IdempotencyKey are optional (a program may print the record it keeps);
// when present they must be the request's.
type CreateResponse struct {
	ID             string `json:"id"`
	NodeName       string `json:"node_name"`
	State          string `json:"state"`
	Pool           string `json:"pool,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// TerminateRequest is the stdin of `<command> terminate`.
type TerminateRequest struct {
	Protocol int               `json:"protocol"`
	Op       string            `json:"op"`
	Pool     string            `json:"pool"`
	ID       string            `json:"id"`
	Config   map[string]string `json:"config"`
}

// TerminateResponse is the stdout of `<command> terminate`: {}.
type TerminateResponse struct{}

// ListRequest is the stdin of `<command> list`; Pool empty means every
// pool.
type ListRequest struct {
	Protocol int               `json:"protocol"`
	Op       string            `json:"op"`
	Pool     string            `json:"pool"`
	Config   map[string]string `json:"config"`
}

// ListHost is one host of a list answer.
type ListHost struct {
	ID             string `json:"id"`
	Pool           string `json:"pool"`
	IdempotencyKey string `json:"idempotency_key"`
	NodeName       string `json:"node_name"`
	State          string `json:"state"`
}

// ListResponse is the stdout of `<command> list`.
type ListResponse struct {
	Hosts []ListHost `json:"hosts"`
}

func newCreateRequest(req provision.CreateRequest, extra map[string]string) CreateRequest {
	s := req.Shape
	servers := req.Join.Servers
	if servers == nil {
		servers = []string{}
	}
	return CreateRequest{
		Protocol: ProtocolVersion, Op: OpCreate, Pool: req.Pool, IdempotencyKey: req.IdempotencyKey, NodeName: req.NodeName,
		Shape: Shape{NodeClass: s.NodeClass, GPUModel: s.GPUModel, GPUCount: s.GPUCount, GPUMemoryMB: s.GPUMemoryMB,
			MemoryModel: s.MemoryModel, Availability: s.Availability},
		Config: extra,
		Join:   Join{Servers: servers, Token: req.Join.Token, Region: req.Join.Region, Datacenter: req.Join.Datacenter},
	}
}

func encodeRequest(in any) ([]byte, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("exec provider: encode request: %w", err)
	}
	return append(b, '\n'), nil
}

// decodeObject decodes stdout, which must hold exactly one JSON object
// (surrounding whitespace allowed) whose fields are all known to out. The
// error names the field or the byte offset that is wrong.
func decodeObject(stdout []byte, out any) error {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return errors.New("stdout is empty: the program must print one JSON object")
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("stdout must be one JSON object, it starts with %q", firstRune(trimmed))
	}
	if !utf8.Valid(trimmed) {
		return errors.New("stdout is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return describeJSONError(err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON object at offset %d", dec.InputOffset())
	}
	return nil
}

func firstRune(b []byte) string {
	r, _ := utf8.DecodeRune(b)
	return string(r)
}

// describeJSONError turns a decode error into one naming the field or
// offset.
func describeJSONError(err error, offset int64) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON at offset %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("field %q: a JSON %s where %s belongs (offset %d)", field, typ.Value, typ.Type, typ.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("JSON object cut short at offset %d", offset)
	}
	// DisallowUnknownFields: `json: unknown field "x"`.
	return fmt.Errorf("%v (offset %d)", err, offset)
}

func (r *CreateResponse) validate(req provision.CreateRequest) error {
	if r.Pool != "" && r.Pool != req.Pool {
		return fmt.Errorf("pool: the answer is for pool %q, the request for %q", r.Pool, req.Pool)
	}
	if r.IdempotencyKey != "" && r.IdempotencyKey != req.IdempotencyKey {
		return fmt.Errorf("idempotency_key: the answer is for key %q, the request for %q", r.IdempotencyKey, req.IdempotencyKey)
	}
	if err := checkText("id", r.ID, MaxIDLen, true); err != nil {
		return err
	}
	if err := checkText("node_name", r.NodeName, MaxNodeNameLen, false); err != nil {
		return err
	}
	return checkText("state", r.State, MaxStateLen, false)
}

func (r *ListResponse) validate() error {
	if len(r.Hosts) > MaxListHosts {
		return fmt.Errorf("hosts: at most %d, got %d", MaxListHosts, len(r.Hosts))
	}
	seen := make(map[string]bool, len(r.Hosts))
	for i, h := range r.Hosts {
		for _, f := range []struct {
			name, v  string
			max      int
			required bool
		}{
			{"id", h.ID, MaxIDLen, true},
			{"pool", h.Pool, MaxNodeNameLen, false},
			{"idempotency_key", h.IdempotencyKey, MaxIDLen, false},
			{"node_name", h.NodeName, MaxNodeNameLen, false},
			{"state", h.State, MaxStateLen, false},
		} {
			if err := checkText(fmt.Sprintf("hosts[%d].%s", i, f.name), f.v, f.max, f.required); err != nil {
				return err
			}
		}
		if seen[h.ID] {
			return fmt.Errorf("hosts[%d].id: %q listed twice", i, h.ID)
		}
		seen[h.ID] = true
	}
	return nil
}

// checkText bounds a string field and refuses control characters.
func checkText(field, v string, max int, required bool) error {
	switch {
	case required && v == "":
		return fmt.Errorf("%s: required", field)
	case len(v) > max:
		return fmt.Errorf("%s: %d bytes, at most %d", field, len(v), max)
	case hasControl(v):
		return fmt.Errorf("%s: %q holds control characters", field, v)
	}
	return nil
}
