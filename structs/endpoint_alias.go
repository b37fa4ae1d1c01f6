package structs

import (
	"fmt"
	"regexp"
)

// This file holds what promoting an alias onto an endpoint needs (issue
// 14): the alias name rule, the Raft requests of promotion and demotion,
// the refusals, and the fleet view of an endpoint the servers answer
// /v1/endpoints with.

// MaxEndpointAliasName is the longest alias or endpoint name, in bytes.
const MaxEndpointAliasName = 63

// endpointAliasNameRE is the shape of an alias name (and of the endpoint
// name a promotion names): lowercase letters, digits, '.' and '-', 1-63
// bytes, starting and ending with a letter or digit.
var endpointAliasNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// ValidateEndpointAliasName checks name against the alias name rule. The
// error wraps ErrInvalid and names field.
func ValidateEndpointAliasName(field, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s: must not be empty", ErrInvalid, field)
	}
	if len(name) > MaxEndpointAliasName {
		return fmt.Errorf("%w: %s: at most %d bytes, got %d", ErrInvalid, field, MaxEndpointAliasName, len(name))
	}
	if !endpointAliasNameRE.MatchString(name) {
		return fmt.Errorf("%w: %s %q: only lowercase letters, digits, '.' and '-', starting and ending with a letter or digit", ErrInvalid, field, name)
	}
	return nil
}

// Refusals of a promotion. Both match ErrInvalid with errors.Is (HTTP 400)
// and are returned wrapped with the endpoint and node they concern.
var (
	// ErrEndpointOpportunistic refuses promoting an alias onto an endpoint
	// whose members run on an opportunistic node: figures measured there
	// are not reproducible.
	ErrEndpointOpportunistic = fmt.Errorf("%w: the endpoint's node is opportunistic; only a continuous node may back a promoted alias", ErrInvalid)
	// ErrEndpointNotPlaced refuses promoting an alias onto an endpoint
	// that has no placed member (no live allocation with a node).
	ErrEndpointNotPlaced = fmt.Errorf("%w: the endpoint has no placed member", ErrInvalid)
)

// Validate checks an alias as stored: namespace, names, who and when.
// Errors wrap ErrInvalid.
func (a *EndpointAlias) Validate() error {
	if a == nil {
		return fmt.Errorf("%w: endpoint alias: nil", ErrInvalid)
	}
	if a.Namespace == "" {
		return fmt.Errorf("%w: endpoint alias %q: Namespace must not be empty", ErrInvalid, a.Name)
	}
	if err := ValidateEndpointAliasName("Name", a.Name); err != nil {
		return err
	}
	if err := ValidateEndpointAliasName("Endpoint", a.Endpoint); err != nil {
		return err
	}
	if a.JobID == "" {
		return fmt.Errorf("%w: endpoint alias %q: JobID must not be empty", ErrInvalid, a.Name)
	}
	if a.PromotedBy == "" || a.PromotedAt <= 0 {
		return fmt.Errorf("%w: endpoint alias %q: PromotedBy and PromotedAt must be set", ErrInvalid, a.Name)
	}
	return nil
}

// Copy returns a copy of the alias (it holds no references).
func (a *EndpointAlias) Copy() *EndpointAlias {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}

// EndpointAliasPromoteRequest (Raft type EndpointAliasPromoteRequestType)
// points Alias.Name at Alias.Endpoint in one transaction: the alias stops
// resolving to its former endpoint at the same Raft index. PromotedBy and
// PromotedAt are set by the endpoint that received the request.
type EndpointAliasPromoteRequest struct {
	Alias *EndpointAlias
}

// EndpointAliasDeleteRequest (Raft type EndpointAliasDeleteRequestType)
// demotes alias Name of Namespace.
type EndpointAliasDeleteRequest struct {
	Namespace string
	Name      string
}

// EndpointAliasPromoteArgs is a promotion as the HTTP layer hands it to
// the server: the alias, the endpoint it should resolve to, and who asks
// ("<accessor ID> (<token name>)" or "anonymous").
type EndpointAliasPromoteArgs struct {
	Namespace  string
	Alias      string
	Endpoint   string
	PromotedBy string
}

// Endpoint statuses in the fleet view.
const (
	// EndpointStatusServing: at least one member is admitted by the
	// node's router, which answers requests.
	EndpointStatusServing = "serving"
	// EndpointStatusDegraded: members run but none is admitted.
	EndpointStatusDegraded = "degraded"
	// EndpointStatusDown: the job is live but no member runs.
	EndpointStatusDown = "down"
	// EndpointStatusStopped: the job declaring the endpoint is stopped.
	EndpointStatusStopped = "stopped"
)

// EndpointView is one endpoint as the fleet sees it: what declares it,
// where it runs, how many members the router admits and the aliases
// resolving to it. Servers build it from one state snapshot, so an alias
// is listed on exactly the endpoint it resolves to at that Raft index.
type EndpointView struct {
	Namespace  string
	Name       string
	JobID      string
	JobVersion uint64
	Group      string
	Model      string
	Revision   string
	Port       int
	// Count is the group's declared member count.
	Count int
	// NodeID, NodeName and NodeAvailability describe the node of the
	// members ("" when none is placed).
	NodeID           string
	NodeName         string
	NodeAvailability string
	// Address is where the node's router listens ("10.0.0.5:9000"): the
	// host IP the plan gave the endpoint's port, else the node's address;
	// "" when no member is placed.
	Address string
	// Members is the number of live (not terminal) allocations; Admitted
	// how many of them the router admits.
	Members  int
	Admitted int
	// MemberList holds the live members, by allocation index.
	MemberList []*EndpointMemberView
	// Aliases are the aliases resolving to this endpoint, sorted.
	Aliases []string
	Status  string
}

// EndpointMemberView is one member (allocation) of an endpoint.
type EndpointMemberView struct {
	AllocID      string
	Index        int
	NodeID       string
	ClientStatus string
	Admitted     bool
	Reason       string
	Identity     EndpointIdentity
}

// FindEndpointGroup returns the group of job that declares endpoint name,
// or nil.
func FindEndpointGroup(job *Job, name string) *TaskGroup {
	if job == nil {
		return nil
	}
	for _, tg := range job.TaskGroups {
		if tg != nil && tg.Endpoint != nil && tg.Endpoint.Name == name {
			return tg
		}
	}
	return nil
}

// LiveEndpointMembers returns the allocations of allocs that are members
// of group (its name) and not terminal: desired to run and not finished by
// their client, in the order given.
func LiveEndpointMembers(allocs []*Allocation, group string) []*Allocation {
	var out []*Allocation
	for _, a := range allocs {
		if a != nil && a.TaskGroup == group && !a.TerminalStatus() {
			out = append(out, a)
		}
	}
	return out
}
