package endpoint

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Status is a snapshot of a router.
type Status struct {
	Endpoint   string
	Model      string
	Policy     string
	ListenAddr string
	// Members are all members, in Index order.
	Members []MemberStatus
	// Admitted is the number of members in the rotation.
	Admitted int
	// Requests counts the requests received; Failed those answered by
	// the router with an error or cut mid-response (a member's own error
	// status is not a failure); Rejected those refused because
	// MaxConcurrent requests were in flight; InFlight those being served.
	Requests uint64
	Failed   uint64
	Rejected uint64
	InFlight int64
}

// MemberStatus is one member's part of Status.
type MemberStatus struct {
	AllocID  string
	Index    int
	Addr     string
	Admitted bool
	// Reason says why the member is not admitted; empty while admitted.
	Reason   string
	Identity structs.EndpointIdentity
	// Outstanding is the number of requests in flight to the member;
	// Served counts the responses it gave (any status); Failed counts the
	// requests dispatched to it that failed (broken connection, timeout).
	Outstanding int64
	Served      uint64
	Failed      uint64
	// LastVerified is when its models listing was last checked (zero:
	// never); UpdatedAt is when its admission last changed.
	LastVerified time.Time
	UpdatedAt    time.Time
}

// Status returns a snapshot of the router and its members.
func (r *Router) Status() Status {
	r.mu.Lock()
	st := Status{
		Endpoint: r.ep.Name,
		Model:    r.ep.Model,
		Policy:   r.ep.Policy,
		Members:  make([]MemberStatus, 0, len(r.members)),
	}
	if r.ln != nil {
		st.ListenAddr = r.ln.Addr().String()
	} else {
		st.ListenAddr = r.cfg.ListenAddr
	}
	for _, m := range r.members {
		ms := MemberStatus{
			AllocID:      m.m.AllocID,
			Index:        m.m.Index,
			Addr:         m.m.Addr,
			Admitted:     m.status.Admitted,
			Reason:       m.status.Reason,
			Identity:     m.m.Identity,
			Outstanding:  m.outstanding.Load(),
			Served:       m.served.Load(),
			Failed:       m.failed.Load(),
			LastVerified: m.lastVerified,
		}
		if m.status.UpdatedAt != 0 {
			ms.UpdatedAt = time.Unix(0, m.status.UpdatedAt)
		}
		if ms.Admitted {
			st.Admitted++
		}
		st.Members = append(st.Members, ms)
	}
	r.mu.Unlock()
	sort.Slice(st.Members, func(i, j int) bool {
		if st.Members[i].Index != st.Members[j].Index {
			return st.Members[i].Index < st.Members[j].Index
		}
		return st.Members[i].AllocID < st.Members[j].AllocID
	})
	st.Requests = r.requests.Load()
	st.Failed = r.failed.Load()
	st.Rejected = r.rejected.Load()
	st.InFlight = r.inFlight.Load()
	return st
}

// statusEvent is one pending OnStatus call.
type statusEvent struct {
	allocID string
	st      structs.EndpointMemberStatus
}

// notifier delivers OnStatus calls in order from one goroutine, so that
// neither a router lock nor the data path ever waits on the callback.
type notifier struct {
	fn    func(string, structs.EndpointMemberStatus)
	mu    sync.Mutex
	queue []statusEvent
	wake  chan struct{} // capacity 1
}

func newNotifier(fn func(string, structs.EndpointMemberStatus)) *notifier {
	return &notifier{fn: fn, wake: make(chan struct{}, 1)}
}

// push queues a call; it never blocks.
func (n *notifier) push(allocID string, st structs.EndpointMemberStatus) {
	if n.fn == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, statusEvent{allocID, st})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run delivers queued calls until ctx is done, then delivers what is left.
func (n *notifier) run(ctx context.Context) {
	for {
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		n.mu.Unlock()
		for _, e := range q {
			n.fn(e.allocID, e.st)
		}
		if len(q) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			n.mu.Lock()
			q := n.queue
			n.queue = nil
			n.mu.Unlock()
			for _, e := range q {
				n.fn(e.allocID, e.st)
			}
			return
		case <-n.wake:
		}
	}
}
