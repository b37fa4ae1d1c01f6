package structs

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors shared by every layer. Callers wrap them with %w and test
// them with errors.Is; the HTTP layer maps them to status codes.
var (
	// ErrNotFound is returned when a job, allocation, evaluation or node
	// does not exist. HTTP: 404.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is returned for input that fails validation. HTTP: 400.
	ErrInvalid = errors.New("invalid")
	// ErrNotLeader is returned by a write that reached a server which is not
	// the Raft leader and could not be forwarded. HTTP: 503.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader is returned when the cluster has no known leader. HTTP: 503.
	ErrNoLeader = errors.New("no cluster leader")
	// ErrPermissionDenied is returned when a token lacks a capability. HTTP: 403.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrShutdown is returned by calls made while the server shuts down.
	ErrShutdown = errors.New("shutting down")
	// ErrNotReady is returned by a server whose state may lag the cluster's:
	// a leader whose barrier has not yet applied the log, or a server that
	// has not caught up with the leader's commit index since it started (or
	// whose state machine halted). Retry, or ask another server. HTTP: 503.
	ErrNotReady = errors.New("server not ready")
	// ErrOutcomeUnknown is returned for a write that reached the leader but
	// whose result was lost (the leader was deposed while committing it, or
	// the forwarded request timed out after it was sent): it may or may not
	// have been applied. Read the object before retrying. HTTP: 504.
	ErrOutcomeUnknown = errors.New("outcome unknown: the write may have been applied; read before retrying")
)

// ValidationError lists every problem found in one object. It matches
// ErrInvalid with errors.Is. Each entry names the field, e.g.
// `group "train": task "main": resources: device "nvidia/gpu": count must be at least 1, got 0`.
type ValidationError struct {
	Problems []string
}

// MaxShownProblems caps the problems ValidationError.Error lists; the
// rest are counted ("... and N more problems"). Problems come from client
// input (one per bad key of a map, say), so the message must stay small
// however many there are.
const MaxShownProblems = 50

// Error joins the problems, one per line: at most MaxShownProblems of
// them, then how many more there were. It takes time linear in what it
// shows.
func (e *ValidationError) Error() string {
	const head = "invalid job:"
	if len(e.Problems) == 1 {
		return head + " " + e.Problems[0]
	}
	var b strings.Builder
	b.WriteString(head)
	for i, p := range e.Problems {
		if i == MaxShownProblems {
			fmt.Fprintf(&b, "\n  * ... and %d more problems", len(e.Problems)-i)
			break
		}
		b.WriteString("\n  * ")
		b.WriteString(p)
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }
