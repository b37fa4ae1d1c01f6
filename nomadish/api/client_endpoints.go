package api

import (
	"maps"
	"time"
)

// ClientEndpoint is one endpoint router a client agent runs, as
// GET /v1/client/endpoints reports it.
type ClientEndpoint struct {
	Namespace  string
	JobID      string
	TaskGroup  string
	Endpoint   string
	Model      string
	Policy     string `json:",omitempty"`
	ListenAddr string
	// Admitted is the number of members in the rotation.
	Admitted int
	// Requests, Failed, Rejected and InFlight are the router's counters
	// since it started.
	Requests uint64
	Failed   uint64
	Rejected uint64
	InFlight int64
	// Error says why the router is not serving; empty while it serves.
	Error   string `json:",omitempty"`
	Members []*ClientEndpointMember
}

// ClientEndpointMember is one member of a ClientEndpoint.
type ClientEndpointMember struct {
	AllocID        string
	Index          int
	Addr           string
	Admitted       bool
	Reason         string `json:",omitempty"`
	JobVersion     uint64
	ArtifactDigest string `json:",omitempty"`
	ConfigDigest   string `json:",omitempty"`
	Outstanding    int64
	Served         uint64
	Failed         uint64
	// LastVerified and UpdatedAt are RFC 3339 in JSON; zero: never.
	LastVerified time.Time
	UpdatedAt    time.Time
	// Processes are the member's task processes as the node's OS reported
	// them when the request was served.
	Processes []*EndpointMemberProcess
}

// EndpointMemberProcess is one member task's process: pid, whether it
// lives, and its resident memory in MiB.
type EndpointMemberProcess struct {
	Task   string
	Driver string
	PID    int
	Alive  bool
	RSSMiB float64
	Error  string `json:",omitempty"`
}

// ClientEndpoints reads the endpoint routers of the agent's own client, or
// with nodeID set those of that node (the server proxies to its agent),
// in q's namespace.
func (c *Client) ClientEndpoints(nodeID string, q *QueryOptions) ([]*ClientEndpoint, error) {
	var out []*ClientEndpoint
	qq := QueryOptions{}
	if q != nil {
		qq = *q
	}
	if nodeID != "" {
		qq.Params = maps.Clone(qq.Params)
		if qq.Params == nil {
			qq.Params = map[string]string{}
		}
		qq.Params["node_id"] = nodeID
	}
	if _, err := c.query("/v1/client/endpoints", &out, &qq); err != nil {
		return nil, err
	}
	return out, nil
}
