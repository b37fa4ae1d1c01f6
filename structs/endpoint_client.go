package structs

// ClientEndpointStatus is one endpoint router a client agent runs, as its
// GET /v1/client/endpoints route reports it: the router's own counters
// and members, and, per member task, what the OS says of its process.
type ClientEndpointStatus struct {
	Namespace string
	JobID     string
	TaskGroup string
	// Endpoint, Model and Policy are the endpoint block's; ListenAddr is
	// where the router listens (host:port).
	Endpoint   string
	Model      string
	Policy     string
	ListenAddr string
	// Admitted is the number of members in the rotation.
	Admitted int
	// Requests counts the requests the router received; Failed those it
	// answered with an error or cut mid-response; Rejected those refused
	// for load; InFlight those being served.
	Requests uint64
	Failed   uint64
	Rejected uint64
	InFlight int64
	// Error says why the router is not serving (its port is taken),
	// empty while it serves.
	Error   string `json:",omitempty"`
	Members []*ClientEndpointMember
}

// ClientEndpointMember is one member of a ClientEndpointStatus.
type ClientEndpointMember struct {
	AllocID string
	// Index is the allocation's index in its group; Addr the host:port
	// the router sends its requests to.
	Index    int
	Addr     string
	Admitted bool
	Reason   string `json:",omitempty"`
	Identity EndpointIdentity
	// Outstanding is the requests in flight to the member; Served the
	// responses it gave; Failed the dispatched requests that failed.
	Outstanding int64
	Served      uint64
	Failed      uint64
	// LastVerified is when its models listing was last checked and
	// UpdatedAt when its admission last changed (Unix nanoseconds, 0:
	// never).
	LastVerified int64
	UpdatedAt    int64
	Processes    []*EndpointMemberProcess
}

// EndpointMemberProcess is a member task's process as the OS reports it
// at the time of the request: its pid, whether it lives (exists and is
// not a zombie) and its resident memory (VmRSS of /proc/<pid>/status) in
// MiB. Error says what could not be read.
type EndpointMemberProcess struct {
	Task   string
	Driver string
	PID    int
	Alive  bool
	RSSMiB float64
	Error  string `json:",omitempty"`
}
