package structs

// DrainStrategy is a node's drain: set by `node drain`, cleared by the
// leader's drainer when the node holds no more running allocations, or by
// `node drain -disable`.
type DrainStrategy struct {
	// Deadline is how long the drain may take, in nanoseconds; 0 means no
	// deadline (batch allocations run to completion), a negative value
	// means stop everything now.
	Deadline int64
	// StartedAt is when the drain began, in Unix nanoseconds.
	StartedAt int64
	// ForceDeadline is StartedAt + Deadline (Unix nanoseconds), 0 when
	// there is none. At that time every allocation left on the node is
	// stopped.
	ForceDeadline int64
}

// DesiredTransition marks an allocation for a server-driven change that
// its desired status does not say.
type DesiredTransition struct {
	// Migrate asks the scheduler to place a replacement on another node;
	// the allocation keeps running until the drainer stops it once the
	// replacement runs.
	Migrate bool `json:",omitempty"`
	// NoShutdownDelay tells the client to stop the allocation without
	// waiting out its group's and tasks' shutdown_delay, cutting a wait
	// already begun (Nomad's DesiredTransition.NoShutdownDelay). The
	// drainer sets it at a drain's deadline.
	NoShutdownDelay bool `json:",omitempty"`
}
