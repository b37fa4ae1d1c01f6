package structs

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
)

// ErrEndpointConflict is returned when a job declares an endpoint name that
// another live (not stopped, not dead) job of the same namespace already
// declares. HTTP: 409.
var ErrEndpointConflict = errors.New("endpoint name conflict")

// Bounds of an endpoint block's strings, in bytes.
const (
	MaxEndpointModelLen      = 256
	MaxEndpointRevisionLen   = 128
	MaxEndpointModelsPathLen = 256
)

// validEndpointName is a DNS-label-like name: lowercase letters, digits,
// '-' and '.', 1-63 bytes, starting and ending with a letter or digit.
var validEndpointName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// ReservedEndpointName names neither an endpoint nor an alias: GET
// /v1/endpoint/aliases lists the aliases, so GET /v1/endpoint/{name}
// could never read one of that name.
const ReservedEndpointName = "aliases"

// ValidEndpointName reports whether name may name an endpoint.
func ValidEndpointName(name string) bool { return validEndpointName.MatchString(name) }

// Copy returns a copy (an Endpoint holds no references).
func (e *Endpoint) Copy() *Endpoint {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}

// EffectiveModelsPath returns ModelsPath, or DefaultEndpointModelsPath when
// it is empty.
func (e *Endpoint) EffectiveModelsPath() string {
	if e.ModelsPath == "" {
		return DefaultEndpointModelsPath
	}
	return e.ModelsPath
}

// EffectivePolicy returns Policy, or EndpointPolicyRoundRobin when it is
// empty.
func (e *Endpoint) EffectivePolicy() string {
	if e.Policy == "" {
		return EndpointPolicyRoundRobin
	}
	return e.Policy
}

// MemberPortLabel returns the label of the group network port each member
// of tg's endpoint serves on: Endpoint.MemberPort, or the group's only port
// label when it is empty; "" when there is none to take.
func (tg *TaskGroup) MemberPortLabel() string {
	if tg == nil || tg.Endpoint == nil {
		return ""
	}
	if tg.Endpoint.MemberPort != "" {
		return tg.Endpoint.MemberPort
	}
	var labels []string
	for _, n := range tg.Networks {
		for _, p := range n.Ports() {
			labels = append(labels, p.Label)
		}
	}
	if len(labels) == 1 {
		return labels[0]
	}
	return ""
}

// EndpointNames returns the names of the endpoints j's groups declare, in
// group order.
func (j *Job) EndpointNames() []string {
	if j == nil {
		return nil
	}
	var out []string
	for _, tg := range j.TaskGroups {
		if tg != nil && tg.Endpoint != nil {
			out = append(out, tg.Endpoint.Name)
		}
	}
	return out
}

// endpointProblems checks the endpoint blocks of j's groups: each one on
// its own (endpointGroupProblems) and their names unique within the job.
// Each problem starts with `group "x": endpoint: `, the path the CLI locates in the jobspec.
func (j *Job) endpointProblems() []string {
	var p []string
	seen := map[string]string{}
	for _, tg := range j.TaskGroups {
		if tg == nil || tg.Endpoint == nil {
			continue
		}
		where := fmt.Sprintf("group %q: endpoint", tg.Name)
		for _, msg := range endpointGroupProblems(j.Type, tg) {
			p = append(p, where+": "+msg)
		}
		name := tg.Endpoint.Name
		if name == "" {
			continue
		}
		if other, dup := seen[name]; dup {
			p = append(p, fmt.Sprintf("%s: name: %q is also the endpoint of group %q", where, name, other))
			continue
		}
		seen[name] = tg.Name
	}
	return p
}

// endpointGroupProblems returns the problems of tg's endpoint block, each
// naming its field.
func endpointGroupProblems(jobType string, tg *TaskGroup) []string {
	e := tg.Endpoint
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if jobType != JobTypeService {
		add("an endpoint needs a job of type %q, got %q", JobTypeService, jobType)
	}
	if tg.Gang {
		add("a gang group cannot declare an endpoint")
	}
	if tg.Count < MinEndpointMembers || tg.Count > MaxEndpointMembers {
		add("count: a group with an endpoint needs count %d-%d, got %d", MinEndpointMembers, MaxEndpointMembers, tg.Count)
	}
	switch {
	case e.Name == "":
		add("name: is required")
	case !validEndpointName.MatchString(e.Name):
		add("name: %q must be 1-63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit", truncate(e.Name, 80))
	case e.Name == ReservedEndpointName:
		add("name: %q is reserved (GET /v1/endpoint/%s lists the aliases)", e.Name, ReservedEndpointName)
	}
	labels := map[string]bool{}
	var order []string
	for _, n := range tg.Networks {
		if n == nil {
			continue
		}
		for _, s := range n.ReservedPorts {
			if e.Port != 0 && s.Value == e.Port {
				add("port: %d is also the group's static network port %q", e.Port, s.Label)
			}
			add("network: port %q: is static, but the %d members share one node and so one host port; use a dynamic port", s.Label, tg.Count)
		}
		for _, port := range n.Ports() {
			if !labels[port.Label] {
				order = append(order, port.Label)
			}
			labels[port.Label] = true
		}
	}
	if e.Port < 1 || e.Port > MaxValidPort {
		add("port: must be 1-%d, got %d", MaxValidPort, e.Port)
	}
	switch {
	case e.Model == "":
		add("model: is required")
	case len(e.Model) > MaxEndpointModelLen:
		add("model: must be at most %d bytes, got %d", MaxEndpointModelLen, len(e.Model))
	case !printable(e.Model):
		add("model: %q must hold printable characters only", truncate(e.Model, 80))
	}
	switch {
	case len(e.Revision) > MaxEndpointRevisionLen:
		add("revision: must be at most %d bytes, got %d", MaxEndpointRevisionLen, len(e.Revision))
	case !printable(e.Revision):
		add("revision: %q must hold printable characters only", truncate(e.Revision, 80))
	}
	switch e.Policy {
	case "", EndpointPolicyRoundRobin, EndpointPolicyLeastOutstanding:
	default:
		add("policy: must be %q or %q, got %q", EndpointPolicyRoundRobin, EndpointPolicyLeastOutstanding, truncate(e.Policy, 80))
	}
	if mp := e.ModelsPath; mp != "" {
		switch {
		case len(mp) > MaxEndpointModelsPathLen:
			add("models_path: must be at most %d bytes, got %d", MaxEndpointModelsPathLen, len(mp))
		case !strings.HasPrefix(mp, "/"):
			add("models_path: %q must start with \"/\"", truncate(mp, 80))
		case strings.ContainsFunc(mp, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '?' || r == '#' || !unicode.IsPrint(r) }):
			add("models_path: %q must not hold spaces, control characters, '?' or '#'", truncate(mp, 80))
		default:
			// The router's verifier requests http://<member><models_path>:
			// a path it cannot parse would leave every member unadmitted.
			if _, err := url.ParseRequestURI(mp); err != nil {
				add("models_path: %q is not a valid URL path: %v", truncate(mp, 80), errors.Unwrap(err))
			}
		}
	}
	switch {
	case e.MemberPort != "" && !labels[e.MemberPort]:
		add("member_port: %q is not a port label of the group's network (labels: %s)", truncate(e.MemberPort, 80), labelList(order))
	case e.MemberPort == "" && len(order) != 1:
		add("member_port: is required unless the group's network has exactly one port label, it has %d (%s)", len(order), labelList(order))
	}
	return p
}

// printable reports whether s is valid UTF-8 of printable characters
// (spaces allowed).
func printable(s string) bool {
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func labelList(labels []string) string {
	if len(labels) == 0 {
		return "none"
	}
	q := make([]string, len(labels))
	for i, l := range labels {
		q[i] = fmt.Sprintf("%q", l)
	}
	return strings.Join(q, ", ")
}
