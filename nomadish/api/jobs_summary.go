package api

// JobListStub is one job of GET /v1/jobs, in the shape of Nomad's list
// stub: the job without its task groups, with its allocation summary.
type JobListStub struct {
	ID               string
	ParentID         string
	Name             string
	Namespace        string
	Datacenters      []string
	Type             string
	Priority         int
	NodePool         string
	Periodic         bool
	ParameterizedJob bool
	// Held is true on a child of a job at its max_running_children,
	// waiting for a running sibling to finish (a GPUlayer addition).
	Held              bool `json:",omitempty"`
	Stop              bool
	Status            string
	StatusDescription string
	// JobSummary counts the job's allocations per task group.
	JobSummary     *JobSummary
	CreateIndex    uint64
	ModifyIndex    uint64
	JobModifyIndex uint64
	// SubmitTime is in Unix nanoseconds.
	SubmitTime int64
	Version    uint64
	Meta       map[string]string `json:",omitempty"`
}

// JobSummary is GET /v1/job/{id}/summary: per task group, how many of the
// job's allocations are in each client status.
type JobSummary struct {
	JobID     string
	Namespace string
	Summary   map[string]TaskGroupSummary
	// Children counts a parent job's children; nil for a job that has
	// none.
	Children    *JobChildrenSummary
	CreateIndex uint64
	ModifyIndex uint64
}

// TaskGroupSummary counts one group's allocations by client status:
// Queued (waiting for a placement), Starting (pending on the client),
// Running, Complete, Failed, Lost; Unknown is always 0 in GPUlayer.
type TaskGroupSummary struct {
	Queued   int
	Complete int
	Failed   int
	Running  int
	Starting int
	Lost     int
	Unknown  int
}

// JobChildrenSummary counts the children of a periodic or parameterized
// job by status.
type JobChildrenSummary struct {
	Pending int64
	Running int64
	Dead    int64
}

// Namespace is one of GET /v1/namespaces, in Nomad's shape. GPUlayer has
// no namespace objects: it answers "default" and the namespaces its jobs
// name.
type Namespace struct {
	Name        string
	Description string
	CreateIndex uint64
	ModifyIndex uint64
}
