package api

import (
	"net/http"
	"net/url"
	"time"
)

// NetworkResource is a group's network block: Mode "host", static ports
// in ReservedPorts and dynamic ones in DynamicPorts (Nomad's shape).
type NetworkResource struct {
	Mode          string `json:",omitempty"`
	IP            string `json:",omitempty"`
	ReservedPorts []Port `json:",omitempty"`
	DynamicPorts  []Port `json:",omitempty"`
}

// Port is one port of a network block: Value is the static (or given)
// host port, To the port inside a docker task it maps to.
type Port struct {
	Label       string
	Value       int    `json:",omitempty"`
	To          int    `json:",omitempty"`
	HostNetwork string `json:",omitempty"`
}

// Service is a group's or task's service block (Nomad's native service
// discovery shape; Provider "gpulayer" or "nomad").
type Service struct {
	Name      string
	TaskName  string          `json:",omitempty"`
	PortLabel string          `json:",omitempty"`
	Tags      []string        `json:",omitempty"`
	Provider  string          `json:",omitempty"`
	Checks    []*ServiceCheck `json:",omitempty"`
}

// ServiceCheck is a check block: Type "http", "tcp" or "script"; Interval
// and Timeout encode in JSON as integer nanoseconds.
type ServiceCheck struct {
	Name      string `json:",omitempty"`
	Type      string
	Path      string   `json:",omitempty"`
	PortLabel string   `json:",omitempty"`
	Command   string   `json:",omitempty"`
	Args      []string `json:",omitempty"`
	TaskName  string   `json:",omitempty"`
	Interval  time.Duration
	Timeout   time.Duration
}

// AllocatedSharedResources is what the plan gave a whole allocation: its
// host ports.
type AllocatedSharedResources struct {
	Ports []AllocatedPortMapping `json:",omitempty"`
	// Endpoint is the router port of the group's endpoint on the node,
	// shared by the endpoint's members (a GPUlayer addition).
	Endpoint *AllocatedEndpoint `json:",omitempty"`
}

// AllocatedPortMapping is one given port: host port Value on HostIP for
// Label, mapped to To inside a container.
type AllocatedPortMapping struct {
	Label  string
	Value  int
	To     int
	HostIP string
}

// ServiceRegistration is one healthy instance of a service (Nomad's
// api.ServiceRegistration).
type ServiceRegistration struct {
	ID          string
	ServiceName string
	Namespace   string
	NodeID      string
	Datacenter  string
	JobID       string
	AllocID     string
	Tags        []string
	Address     string
	Port        int
	CreateIndex uint64
	ModifyIndex uint64
}

// ServiceRegistrationListStub is one namespace's services in GET
// /v1/services (Nomad's shape).
type ServiceRegistrationListStub struct {
	Namespace string
	Services  []*ServiceRegistrationStub
}

// ServiceRegistrationStub names a service and the union of its instances'
// tags.
type ServiceRegistrationStub struct {
	ServiceName string
	Tags        []string
}

// CheckQueryResult is the latest result of one check of an allocation,
// from GET /v1/client/allocation/:id/checks (Nomad 1.4's shape). Status
// is "pending", "success" or "failure"; Timestamp is Unix seconds.
type CheckQueryResult struct {
	ID         string
	Mode       string
	Status     string
	StatusCode int    `json:",omitempty"`
	Output     string `json:",omitempty"`
	Timestamp  int64
	Group      string
	Task       string `json:",omitempty"`
	Service    string
	Check      string
}

// Services is the client for /v1/services and /v1/service/:name.
type Services struct{ c *Client }

// Services returns the services endpoints.
func (c *Client) Services() *Services { return &Services{c: c} }

// List returns the services of the client's namespace ("*": every
// namespace the token may read), grouped by namespace.
func (s *Services) List(q *QueryOptions) ([]*ServiceRegistrationListStub, *QueryMeta, error) {
	var out []*ServiceRegistrationListStub
	qm, err := s.c.query("/v1/services", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Get returns every healthy instance of service name.
func (s *Services) Get(name string, q *QueryOptions) ([]*ServiceRegistration, *QueryMeta, error) {
	var out []*ServiceRegistration
	qm, err := s.c.query("/v1/service/"+url.PathEscape(name), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Delete removes one registration of service name.
func (s *Services) Delete(name, id string, w *WriteOptions) (*WriteMeta, error) {
	return s.c.write(http.MethodDelete, "/v1/service/"+url.PathEscape(name)+"/"+url.PathEscape(id), nil, nil, nil, w)
}

// Checks returns the latest result of each check of an allocation,
// by check ID.
func (a *Allocations) Checks(id string, q *QueryOptions) (map[string]*CheckQueryResult, *QueryMeta, error) {
	out := map[string]*CheckQueryResult{}
	qm, err := a.c.query("/v1/client/allocation/"+url.PathEscape(id)+"/checks", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}
