package api

// Endpoint is a service group's endpoint block (a GPUlayer addition, no
// Nomad equivalent): the group's Count members (2-16) are placed on one
// node and served behind one router on Port of that node.
type Endpoint struct {
	// Name names the endpoint, unique among the live jobs of a namespace
	// (lowercase letters, digits, '-' and '.', at most 63 bytes).
	Name string
	// Port is the host TCP port (1-65535) the router listens on.
	Port int
	// Model is the served model name a member's models listing must hold
	// before the member is admitted.
	Model string
	// Revision is the declared model revision.
	Revision string `json:",omitempty"`
	// Policy is "round_robin" (empty) or "least_outstanding".
	Policy string `json:",omitempty"`
	// ModelsPath is the HTTP path members list their models on; empty
	// means "/v1/models".
	ModelsPath string `json:",omitempty"`
	// MemberPort is the label of the group network port each member
	// serves on; empty means the group's only port label.
	MemberPort string `json:",omitempty"`
}

// AllocatedEndpoint is the router port an endpoint member's allocation
// holds on its node, shared by all members of the endpoint.
type AllocatedEndpoint struct {
	Name   string
	Port   int
	HostIP string `json:",omitempty"`
}
