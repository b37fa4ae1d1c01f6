package structs

import "time"

// QueryOptions shape a read: blocking queries wait until the result's index
// exceeds MinQueryIndex or MaxQueryTime passes.
type QueryOptions struct {
	// MinQueryIndex: return only once the index is greater than this.
	// Zero returns at once.
	MinQueryIndex uint64
	// MaxQueryTime bounds the wait; zero means 5 minutes, and it is capped
	// at 10 minutes (Nomad's defaults).
	MaxQueryTime time.Duration
	// AllowStale lets any server answer from its own state.
	AllowStale bool
	// Prefix filters list results by ID prefix.
	Prefix string
}

// Default and maximum blocking query wait, as in Nomad.
const (
	DefaultBlockingQueryWait = 5 * time.Minute
	MaxBlockingQueryWait     = 10 * time.Minute
)

// QueryMeta describes a read's result.
type QueryMeta struct {
	// Index is the Raft index of the data returned; pass it as the next
	// MinQueryIndex to wait for a change.
	Index       uint64
	KnownLeader bool
	LastContact time.Duration
}

// WriteMeta describes a committed write.
type WriteMeta struct {
	// Index is the Raft index at which the write was applied.
	Index uint64
}

// JobRegisterResponse answers a job registration.
type JobRegisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Warnings        string
	WriteMeta
}

// JobDeregisterResponse answers a job stop or purge.
type JobDeregisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	WriteMeta
}
