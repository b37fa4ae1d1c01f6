// Package structs holds GPUlayer's domain types: jobs, task groups, tasks,
// nodes and their devices, allocations, evaluations and plans, plus the Raft
// message types and their msgpack encoding.
//
// Objects stored in the state store are never mutated after insert: callers
// Copy, change and upsert. The package imports only the standard library and
// go-msgpack so every other layer can depend on it.
package structs
