package structs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Service providers. GPUlayer registers services in its own state (Nomad's
// native service discovery); "nomad" is accepted as a synonym so Nomad
// jobspecs run unchanged. Consul is not supported.
const (
	ServiceProviderGpulayer = "gpulayer"
	ServiceProviderNomad    = "nomad"
)

// Check types.
const (
	ServiceCheckHTTP   = "http"
	ServiceCheckTCP    = "tcp"
	ServiceCheckScript = "script"
)

// Network modes. Only host networking is supported: tasks bind host ports
// (native) or get a port mapping (docker).
const NetworkModeHost = "host"

// Port ranges, as in Nomad: dynamic host ports come from
// [DefaultMinDynamicPort, DefaultMaxDynamicPort] unless the node says
// otherwise (NodeResources.MinDynamicPort, MaxDynamicPort).
const (
	DefaultMinDynamicPort = 20000
	DefaultMaxDynamicPort = 32000
	MaxValidPort          = 65535
)

// Bounds on service and network blocks, so one job cannot make the
// scheduler or the check runner do unbounded work.
const (
	MaxGroupPorts       = 64
	MaxServicesPerBlock = 32
	MaxChecksPerService = 16
	MaxServiceTags      = 32
	MaxServiceTagLen    = 255
	MaxCheckArgs        = 64
	MaxCheckPathLen     = 1024
	// MinCheckInterval and MinCheckTimeout bound how often the client
	// runs a check and how short its deadline may be. Nomad's minimum is
	// one second; GPUlayer allows 100 ms so rollouts under test are fast.
	MinCheckInterval = 100 * time.Millisecond
	MinCheckTimeout  = 100 * time.Millisecond
	// MaxCheckInterval and MaxCheckTimeout bound them from above.
	MaxCheckInterval = time.Hour
	MaxCheckTimeout  = 10 * time.Minute
)

// NetworkResource is a group's `network` block (Nomad's shape): the ports
// its allocations need. On a node (NodeResources.Networks) it describes the
// host network: IP is the address services register with.
type NetworkResource struct {
	// Mode is "host" (the default when empty).
	Mode string
	// IP is the host address (node side and allocated side); empty in a
	// job.
	IP string `json:",omitempty"`
	// ReservedPorts are static ports: the host port is Value.
	ReservedPorts []Port `json:",omitempty"`
	// DynamicPorts get a free host port from the node's dynamic range.
	DynamicPorts []Port `json:",omitempty"`
}

// Port is one `port "label" { static to host_network }`.
type Port struct {
	Label string
	// Value is the host port: the static port asked for, or (allocated)
	// the port given.
	Value int `json:",omitempty"`
	// To is the port inside a docker task's network namespace the host
	// port maps to; 0 means the same as the host port. Ignored by native
	// tasks, which bind the host port.
	To int `json:",omitempty"`
	// HostNetwork names the host network; only "" / "default" is
	// supported.
	HostNetwork string `json:",omitempty"`
}

// AllocatedSharedResources is what the plan gave the whole allocation
// rather than one task: its host ports.
type AllocatedSharedResources struct {
	Ports []AllocatedPortMapping `json:",omitempty"`
	// Endpoint is the router port of the group's endpoint on the node
	// (structs/endpoint_alloc.go): every member of one endpoint carries
	// the same one and shares it; nil for groups without an endpoint.
	Endpoint *AllocatedEndpoint `json:",omitempty"`
}

// AllocatedPortMapping is one port the plan gave an allocation: host port
// Value on HostIP for label Label, mapped to To inside a container (0:
// the same).
type AllocatedPortMapping struct {
	Label  string
	Value  int
	To     int
	HostIP string
}

// Service is a `service` block of a group or a task (Nomad's native
// service discovery shape).
type Service struct {
	// Name is the service's name, the key users look it up by.
	Name string
	// TaskName is set on a task's service (by Canonicalize) and names the
	// task whose environment script checks run in.
	TaskName string `json:",omitempty"`
	// PortLabel names a port of the group's network block; the
	// registration carries its host port. Empty registers port 0.
	PortLabel string   `json:",omitempty"`
	Tags      []string `json:",omitempty"`
	// Provider is ServiceProviderGpulayer (the default) or
	// ServiceProviderNomad.
	Provider string          `json:",omitempty"`
	Checks   []*ServiceCheck `json:",omitempty"`
}

// ServiceCheck is a `check` block: how the client decides an instance is
// healthy. Interval and Timeout are durations (JSON: nanoseconds).
type ServiceCheck struct {
	Name string `json:",omitempty"`
	// Type is ServiceCheckHTTP, ServiceCheckTCP or ServiceCheckScript.
	Type string
	// Path is the HTTP path (http checks), starting with "/".
	Path string `json:",omitempty"`
	// PortLabel overrides the service's port (http, tcp).
	PortLabel string `json:",omitempty"`
	// Command and Args are the script check's command, run inside the
	// task's environment; exit 0 passes.
	Command string   `json:",omitempty"`
	Args    []string `json:",omitempty"`
	// TaskName names the task a group service's script check runs in
	// (Nomad's `task`); a task service's checks run in its own task.
	TaskName string `json:",omitempty"`
	Interval time.Duration
	Timeout  time.Duration
}

// ServiceRegistration is one healthy instance of a service, stored in the
// state store (Nomad's structs.ServiceRegistration). ID is unique per
// allocation, service and port (see ServiceRegistrationID).
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

// ServiceRegistrationID is the registration ID of an allocation's
// instance of a service: "_gpulayer-<alloc-id>-<group or task>-<name>-<port
// label>", as Nomad builds "_nomad-task-...".
func ServiceRegistrationID(allocID, owner, name, portLabel string) string {
	return fmt.Sprintf("_gpulayer-%s-%s-%s-%s", allocID, owner, name, portLabel)
}

// Copy returns a deep copy.
func (r *ServiceRegistration) Copy() *ServiceRegistration {
	if r == nil {
		return nil
	}
	c := *r
	c.Tags = slices.Clone(r.Tags)
	return &c
}

// Equal reports whether r and o register the same instance the same way,
// Raft indexes aside.
func (r *ServiceRegistration) Equal(o *ServiceRegistration) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.ID == o.ID && r.ServiceName == o.ServiceName && r.Namespace == o.Namespace && r.NodeID == o.NodeID &&
		r.Datacenter == o.Datacenter && r.JobID == o.JobID && r.AllocID == o.AllocID && r.Address == o.Address &&
		r.Port == o.Port && slices.Equal(r.Tags, o.Tags)
}

// Validate checks a registration a client sends: the IDs, name and
// address are set, the port is in range and tags are bounded. Errors wrap
// ErrInvalid.
func (r *ServiceRegistration) Validate() error {
	var p []string
	switch {
	case r.ID == "" || len(r.ID) > 512:
		p = append(p, "ID: must be 1-512 characters")
	case r.AllocID == "":
		p = append(p, "AllocID: is required")
	case r.Namespace == "":
		p = append(p, "Namespace: is required")
	}
	if !validServiceName.MatchString(r.ServiceName) {
		p = append(p, fmt.Sprintf("ServiceName: %q is not a service name (letters, digits, '-', '_', '.'; at most 128)", r.ServiceName))
	}
	if r.Port < 0 || r.Port > MaxValidPort {
		p = append(p, fmt.Sprintf("Port: must be 0-%d, got %d", MaxValidPort, r.Port))
	}
	if len(r.Address) > 256 {
		p = append(p, "Address: at most 256 characters")
	}
	p = append(p, tagProblems(r.Tags)...)
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

var (
	validServiceName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)
	// validPortLabel matches what may follow NOMAD_PORT_ in a variable
	// name, as Nomad requires.
	validPortLabel = regexp.MustCompile(`^[a-zA-Z0-9_]{1,64}$`)
)

func tagProblems(tags []string) []string {
	var p []string
	if len(tags) > MaxServiceTags {
		p = append(p, fmt.Sprintf("tags: at most %d, got %d", MaxServiceTags, len(tags)))
	}
	for _, t := range tags {
		if t == "" || len(t) > MaxServiceTagLen {
			p = append(p, fmt.Sprintf("tags: each must be 1-%d characters", MaxServiceTagLen))
			break
		}
	}
	return p
}

// Ports returns the group's port labels in order, static ones first.
func (n *NetworkResource) Ports() []Port {
	if n == nil {
		return nil
	}
	out := make([]Port, 0, len(n.ReservedPorts)+len(n.DynamicPorts))
	out = append(out, n.ReservedPorts...)
	return append(out, n.DynamicPorts...)
}

// Copy returns a deep copy.
func (n *NetworkResource) Copy() *NetworkResource {
	if n == nil {
		return nil
	}
	c := *n
	c.ReservedPorts = slices.Clone(n.ReservedPorts)
	c.DynamicPorts = slices.Clone(n.DynamicPorts)
	return &c
}

// Copy returns a deep copy.
func (s *Service) Copy() *Service {
	if s == nil {
		return nil
	}
	c := *s
	c.Tags = slices.Clone(s.Tags)
	if s.Checks != nil {
		c.Checks = make([]*ServiceCheck, len(s.Checks))
		for i, ch := range s.Checks {
			if ch != nil {
				cc := *ch
				cc.Args = slices.Clone(ch.Args)
				c.Checks[i] = &cc
			}
		}
	}
	return &c
}

// Copy returns a deep copy.
func (s *AllocatedSharedResources) Copy() *AllocatedSharedResources {
	if s == nil {
		return nil
	}
	return &AllocatedSharedResources{Ports: slices.Clone(s.Ports), Endpoint: s.Endpoint.Copy()}
}

// Port returns the mapping of label, or false.
func (s *AllocatedSharedResources) Port(label string) (AllocatedPortMapping, bool) {
	if s == nil {
		return AllocatedPortMapping{}, false
	}
	for _, p := range s.Ports {
		if p.Label == label {
			return p, true
		}
	}
	return AllocatedPortMapping{}, false
}

func copyNetworks(ns []*NetworkResource) []*NetworkResource {
	if ns == nil {
		return nil
	}
	out := make([]*NetworkResource, len(ns))
	for i, n := range ns {
		out[i] = n.Copy()
	}
	return out
}

func copyServices(ss []*Service) []*Service {
	if ss == nil {
		return nil
	}
	out := make([]*Service, len(ss))
	for i, s := range ss {
		out[i] = s.Copy()
	}
	return out
}

// DynamicPortRange returns the node's dynamic port range, defaults
// filled.
func (n *Node) DynamicPortRange() (lo, hi int) {
	lo, hi = DefaultMinDynamicPort, DefaultMaxDynamicPort
	if r := n.NodeResources; r != nil {
		if r.MinDynamicPort > 0 {
			lo = r.MinDynamicPort
		}
		if r.MaxDynamicPort > 0 {
			hi = r.MaxDynamicPort
		}
	}
	return lo, hi
}

// HostIP returns the address a node's allocations are reached at: the IP
// of its first host network, or "127.0.0.1".
func (n *Node) HostIP() string {
	if r := n.NodeResources; r != nil {
		for _, nw := range r.Networks {
			if nw != nil && nw.IP != "" {
				return nw.IP
			}
		}
	}
	return "127.0.0.1"
}

// groupNetworkProblems checks a group's network blocks: at most one, mode
// host, unique valid labels, ports in range, at most MaxGroupPorts.
func groupNetworkProblems(tg *TaskGroup) []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if len(tg.Networks) > 1 {
		add("network: at most one network block, got %d", len(tg.Networks))
	}
	seen := map[string]bool{}
	for _, n := range tg.Networks {
		if n == nil {
			add("network: is null")
			continue
		}
		if n.Mode != "" && n.Mode != NetworkModeHost {
			add("network: mode: only %q is supported, got %q", NetworkModeHost, n.Mode)
		}
		if len(n.ReservedPorts)+len(n.DynamicPorts) > MaxGroupPorts {
			add("network: at most %d ports, got %d", MaxGroupPorts, len(n.ReservedPorts)+len(n.DynamicPorts))
			continue
		}
		statics := map[int]string{}
		for i, port := range n.Ports() {
			static := i < len(n.ReservedPorts)
			w := fmt.Sprintf("network: port %q", port.Label)
			if !validPortLabel.MatchString(port.Label) {
				add("network: port %d: label %q must be 1-64 letters, digits or '_'", i+1, port.Label)
			}
			if seen[port.Label] {
				add("%s: label used twice", w)
			}
			seen[port.Label] = true
			if static {
				if port.Value < 1 || port.Value > MaxValidPort {
					add("%s: static: must be 1-%d, got %d", w, MaxValidPort, port.Value)
				} else if prev, dup := statics[port.Value]; dup {
					add("%s: static: port %d is also port %q", w, port.Value, prev)
				}
				statics[port.Value] = port.Label
			} else if port.Value != 0 {
				add("%s: a dynamic port has no value", w)
			}
			if port.To < -1 || port.To > MaxValidPort {
				add("%s: to: must be -1-%d, got %d", w, MaxValidPort, port.To)
			}
			if port.HostNetwork != "" && port.HostNetwork != "default" {
				add("%s: host_network: only the default host network is supported, got %q", w, port.HostNetwork)
			}
		}
	}
	return p
}

// groupServiceProblems checks the group's and its tasks' services against
// the group's ports.
func groupServiceProblems(tg *TaskGroup) []string {
	labels := map[string]bool{}
	for _, n := range tg.Networks {
		for _, port := range n.Ports() {
			labels[port.Label] = true
		}
	}
	tasks := map[string]bool{}
	for _, t := range tg.Tasks {
		if t != nil {
			tasks[t.Name] = true
		}
	}
	p := serviceProblems("", tg.Services, labels, tasks, "")
	for _, t := range tg.Tasks {
		if t != nil {
			p = append(p, serviceProblems(fmt.Sprintf("task %q: ", t.Name), t.Services, labels, tasks, t.Name)...)
		}
	}
	return p
}

func serviceProblems(prefix string, ss []*Service, labels, tasks map[string]bool, task string) []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, prefix+fmt.Sprintf(format, a...)) }
	if len(ss) > MaxServicesPerBlock {
		add("service: at most %d services, got %d", MaxServicesPerBlock, len(ss))
		return p
	}
	seen := map[[2]string]bool{}
	for i, s := range ss {
		if s == nil {
			add("service %d: is null", i+1)
			continue
		}
		w := fmt.Sprintf("service %q", s.Name)
		// The registration ID is made of the owner, name and port label.
		if key := [2]string{s.Name, s.PortLabel}; seen[key] {
			add("%s: defined twice on port %q here", w, s.PortLabel)
		} else {
			seen[key] = true
		}
		if !validServiceName.MatchString(s.Name) {
			w = fmt.Sprintf("service %d", i+1)
			add("%s: name: %q is not a service name (letters, digits, '-', '_', '.'; at most 128)", w, s.Name)
		}
		switch s.Provider {
		case "", ServiceProviderGpulayer, ServiceProviderNomad:
		default:
			add("%s: provider: must be %q or %q (Consul is not supported), got %q", w, ServiceProviderGpulayer, ServiceProviderNomad, s.Provider)
		}
		if s.PortLabel != "" && !labels[s.PortLabel] {
			add("%s: port: %q is not a port of the group's network block", w, s.PortLabel)
		}
		for _, msg := range tagProblems(s.Tags) {
			add("%s: %s", w, msg)
		}
		if len(s.Checks) > MaxChecksPerService {
			add("%s: at most %d checks, got %d", w, MaxChecksPerService, len(s.Checks))
			continue
		}
		for j, c := range s.Checks {
			cw := fmt.Sprintf("%s: check %d", w, j+1)
			if c == nil {
				add("%s: is null", cw)
				continue
			}
			for _, msg := range checkProblems(s, c, labels, tasks, task) {
				add("%s: %s", cw, msg)
			}
		}
	}
	return p
}

func checkProblems(s *Service, c *ServiceCheck, labels, tasks map[string]bool, task string) []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	switch c.Type {
	case ServiceCheckHTTP, ServiceCheckTCP, ServiceCheckScript:
	default:
		add("type: must be %q, %q or %q, got %q", ServiceCheckHTTP, ServiceCheckTCP, ServiceCheckScript, c.Type)
	}
	switch {
	case c.Interval < 0:
		add("interval: must not be negative, got %s", c.Interval)
	case c.Interval < MinCheckInterval || c.Interval > MaxCheckInterval:
		add("interval: must be between %s and %s, got %s", MinCheckInterval, MaxCheckInterval, c.Interval)
	}
	switch {
	case c.Timeout < 0:
		add("timeout: must not be negative, got %s", c.Timeout)
	case c.Timeout < MinCheckTimeout || c.Timeout > MaxCheckTimeout:
		add("timeout: must be between %s and %s, got %s", MinCheckTimeout, MaxCheckTimeout, c.Timeout)
	}
	if len(c.Name) > 128 {
		add("name: at most 128 characters")
	}
	port := c.PortLabel
	if port == "" {
		port = s.PortLabel
	}
	if c.PortLabel != "" && !labels[c.PortLabel] {
		add("port: %q is not a port of the group's network block", c.PortLabel)
	}
	switch c.Type {
	case ServiceCheckHTTP:
		if !strings.HasPrefix(c.Path, "/") || len(c.Path) > MaxCheckPathLen {
			add("path: an http check needs a path starting with \"/\" (at most %d characters), got %q", MaxCheckPathLen, c.Path)
		}
		if strings.IndexFunc(c.Path, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			// A CR, LF or space never reaches the wire (the check's
			// request is refused at every run); say so at submit.
			add("path: must not hold spaces or control characters, got %q", c.Path)
		}
		if port == "" {
			add("port: an http check needs a port (the service's or its own)")
		}
	case ServiceCheckTCP:
		if port == "" {
			add("port: a tcp check needs a port (the service's or its own)")
		}
	case ServiceCheckScript:
		if c.Command == "" {
			add("command: a script check needs a command")
		}
		if len(c.Args) > MaxCheckArgs {
			add("args: at most %d, got %d", MaxCheckArgs, len(c.Args))
		}
		t := task
		if t == "" {
			t = c.TaskName
		}
		switch {
		case t == "":
			add("task: a group service's script check must name the task it runs in")
		case !tasks[t]:
			add("task: %q is not a task of the group", t)
		case task != "" && c.TaskName != "" && c.TaskName != task:
			add("task: a task service's check runs in its own task %q, not %q", task, c.TaskName)
		}
	}
	return p
}

// CheckTask returns the task a script check runs in.
func (c *ServiceCheck) CheckTask(s *Service) string {
	if s.TaskName != "" {
		return s.TaskName
	}
	return c.TaskName
}

// GroupServices returns every service of the group, the group's own first
// then each task's, in order.
func (tg *TaskGroup) GroupServices() []*Service {
	out := slices.Clone(tg.Services)
	for _, t := range tg.Tasks {
		if t != nil {
			out = append(out, t.Services...)
		}
	}
	return out
}

// canonicalizeServices names each task service's task.
func (tg *TaskGroup) canonicalizeServices() {
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		for _, s := range t.Services {
			if s != nil {
				s.TaskName = t.Name
			}
		}
	}
}

// ServiceRegistrationUpsertRequest stores healthy service instances (the
// endpoint has checked that each belongs to a live allocation of the
// calling node and filled the job, namespace and datacenter from it).
type ServiceRegistrationUpsertRequest struct {
	Services []*ServiceRegistration
}

// ServiceRegistrationDeleteByIDRequest removes registrations by ID (an
// instance whose check failed, or an operator's DELETE).
type ServiceRegistrationDeleteByIDRequest struct {
	Namespace string
	IDs       []string
}

// ServiceRegistrationDeleteByAllocIDRequest removes every registration of
// the allocations (their client stopped them).
type ServiceRegistrationDeleteByAllocIDRequest struct {
	AllocIDs []string
}

// NodeServicesRequest is what a client sends about its allocations'
// service instances: instances that became healthy (Upsert), instances
// that stopped being healthy (Delete, by registration ID) and allocations
// whose every instance is gone (DeleteAllocs). The servers accept only the
// calling node's allocations.
type NodeServicesRequest struct {
	Upsert       []*ServiceRegistration `json:",omitempty"`
	Delete       []string               `json:",omitempty"`
	DeleteAllocs []string               `json:",omitempty"`
}

// MaxNodeServicesBatch bounds each list of a NodeServicesRequest.
const MaxNodeServicesBatch = 1024

// Check statuses, as Nomad 1.4 reports them.
const (
	CheckPending = "pending"
	CheckSuccess = "success"
	CheckFailure = "failure"
)

// CheckStatus is the latest result of one check of an allocation, kept by
// its client (Nomad's CheckQueryResult). Timestamp is Unix seconds;
// Output is bounded by the client.
type CheckStatus struct {
	ID         string
	Mode       string // "healthiness"
	Status     string // CheckPending, CheckSuccess or CheckFailure
	StatusCode int
	Output     string
	Timestamp  int64
	Group      string
	Task       string
	Service    string
	Check      string
}

// MaxReservedPortSpecLen bounds a reserved port list such as
// "22,80,8000-8080".
const MaxReservedPortSpecLen = 1024

// ParsePortRanges parses a comma-separated list of ports and inclusive
// ranges ("22,80,8000-8080", Nomad's reserved_ports syntax) into sorted,
// distinct ports. Spaces around items are allowed; an empty string is no
// ports. Errors wrap ErrInvalid for a malformed item, a port outside
// 1-65535, a range whose end is below its start, or a list longer than
// MaxReservedPortSpecLen.
func ParsePortRanges(spec string) ([]int, error) {
	if len(spec) > MaxReservedPortSpecLen {
		return nil, fmt.Errorf("%w: port list longer than %d characters", ErrInvalid, MaxReservedPortSpecLen)
	}
	seen := map[int]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parsePort(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("%w: port %q: %v", ErrInvalid, item, err)
		}
		b := a
		if isRange {
			if b, err = parsePort(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("%w: port range %q: %v", ErrInvalid, item, err)
			}
			if b < a {
				return nil, fmt.Errorf("%w: port range %q ends before it starts", ErrInvalid, item)
			}
		}
		for p := a; p <= b; p++ {
			seen[p] = true
		}
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, fmt.Errorf("want a port number 1-%d", MaxValidPort)
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("want a port number 1-%d", MaxValidPort)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > MaxValidPort {
		return 0, fmt.Errorf("want a port number 1-%d, got %d", MaxValidPort, n)
	}
	return n, nil
}

// ReservedPorts returns the node's reserved host ports
// (ReservedResources.Networks.ReservedHostPorts), which no allocation may
// be given; a list that does not parse reserves nothing (the client
// checks it before registering).
func (n *Node) ReservedPorts() []int {
	if n.ReservedResources == nil || n.ReservedResources.Networks.ReservedHostPorts == "" {
		return nil
	}
	ports, err := ParsePortRanges(n.ReservedResources.Networks.ReservedHostPorts)
	if err != nil {
		return nil
	}
	return ports
}
