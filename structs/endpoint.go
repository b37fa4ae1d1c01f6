package structs

// This file holds the types of same-host model-serving endpoints (issue
// 14): a service group's endpoint block, the members' admission state the
// client reports, and the aliases promoted onto an endpoint through Raft.
// Validation, parsing and the router live with their owners
// (structs/endpoint_validate.go, nomadish/jobspec, agent/client/endpoint).

// Endpoint routing policies.
const (
	// EndpointPolicyRoundRobin sends each request to the next admitted
	// member in a fixed order (the default).
	EndpointPolicyRoundRobin = "round_robin"
	// EndpointPolicyLeastOutstanding sends each request to the admitted
	// member with the fewest requests in flight (ties: the fixed order).
	EndpointPolicyLeastOutstanding = "least_outstanding"

	// DefaultEndpointModelsPath is the OpenAI-compatible path a member is
	// live-verified on.
	DefaultEndpointModelsPath = "/v1/models"

	// MinEndpointMembers and MaxEndpointMembers bound the group count of
	// a group with an endpoint.
	MinEndpointMembers = 2
	MaxEndpointMembers = 16
)

// Endpoint is a service group's endpoint block: its Count members (2-16)
// are placed on one node and served behind one router listening on Port
// of that node, run by the node's client agent.
type Endpoint struct {
	// Name names the endpoint, unique among the live jobs of a namespace
	// (lowercase letters, digits, '-' and '.', at most 63 bytes).
	Name string
	// Port is the host TCP port (1-65535) the router listens on.
	Port int
	// Model is the served model name a member's models listing must hold
	// before the member is admitted.
	Model string
	// Revision is the declared model revision, shown in status.
	Revision string `json:",omitempty"`
	// Policy is EndpointPolicyRoundRobin (empty) or
	// EndpointPolicyLeastOutstanding.
	Policy string `json:",omitempty"`
	// ModelsPath is the HTTP path the member lists its models on; empty
	// means DefaultEndpointModelsPath.
	ModelsPath string `json:",omitempty"`
	// MemberPort is the label of the group network port each member
	// serves on; empty means the group's only port label.
	MemberPort string `json:",omitempty"`
}

// EndpointIdentity is what makes two members identical: the job version,
// the digest of what runs (docker: the resolved image ID; native: the hex
// SHA-256 of the command's binary) and the digest of the task's config.
type EndpointIdentity struct {
	JobVersion     uint64
	ArtifactDigest string
	ConfigDigest   string
}

// EndpointMemberStatus is an allocation's state in its node's endpoint
// router, reported by the client with the allocation's status.
type EndpointMemberStatus struct {
	// Admitted is true while the router sends requests to the member.
	Admitted bool
	// Reason says why the member is not admitted ("checks failing",
	// "model \"x\" not listed by /v1/models", "image digest differs from
	// the admitted members"); empty while admitted.
	Reason   string `json:",omitempty"`
	Identity EndpointIdentity
	// UpdatedAt is when the router last changed this status, in Unix
	// nanoseconds (client clock).
	UpdatedAt int64
}

// EndpointAlias is a promoted alias ("llm.primary") that resolves to
// exactly one endpoint of its namespace; promotion moves it atomically.
type EndpointAlias struct {
	Namespace string
	// Name is the alias (lowercase letters, digits, '-' and '.').
	Name string
	// Endpoint is the name of the endpoint the alias resolves to.
	Endpoint string
	// JobID is the job declaring Endpoint when the alias was promoted.
	JobID string
	// PromotedBy names who promoted it (the ACL token's accessor ID and
	// name, or "anonymous"); PromotedAt is when, in Unix nanoseconds,
	// set by the endpoint that received the request.
	PromotedBy string
	PromotedAt int64

	CreateIndex uint64
	ModifyIndex uint64
}
