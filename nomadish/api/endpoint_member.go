package api

import "time"

// AllocEndpointMember is an allocation's state in its node's endpoint
// router: whether requests are sent to it and, when not, why; and the
// identity the router compared with the other members.
type AllocEndpointMember struct {
	// Admitted is true while the router sends requests to the member.
	Admitted bool
	// Reason says why the member is not admitted; empty while admitted.
	Reason string `json:",omitempty"`
	// JobVersion, ArtifactDigest (docker: the resolved image ID; native:
	// the hex SHA-256 of the command's binary) and ConfigDigest (hex
	// SHA-256 of the tasks' driver config and declared env) are what
	// make two members identical.
	JobVersion     uint64
	ArtifactDigest string `json:",omitempty"`
	ConfigDigest   string `json:",omitempty"`
	// UpdatedAt is when the router last changed this status (the
	// client's clock; RFC 3339 in JSON).
	UpdatedAt time.Time
}
