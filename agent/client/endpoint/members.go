package endpoint

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Admission reasons that are not built from a verification error.
const (
	reasonChecksFailing = "service checks failing"
	reasonUnverified    = "awaiting live verification"
)

// member is the router's state of one Member. A change of Addr makes a
// new member (new connection pool); other changes update it in place.
type member struct {
	r *Router
	// allocID, addr and pool never change (the data path reads them
	// without a lock); the Member they came from is m.
	allocID string
	addr    string
	pool    *connPool

	outstanding atomic.Int64
	served      atomic.Uint64
	failed      atomic.Uint64

	kick chan struct{} // capacity 1: verify now
	stop chan struct{} // closed to stop the verifier

	// Guarded by Router.mu.
	m            Member
	addrErr      string // non-empty: Addr is unusable, never admitted
	gen          uint64 // bumped when a verification in flight is stale
	verified     bool
	verifyReason string
	lastVerified time.Time
	verifying    bool // the verifier goroutine runs
	stopped      bool
	removed      bool
	reported     bool
	status       structs.EndpointMemberStatus
}

func newMember(r *Router, nm Member) *member {
	m := &member{
		r:            r,
		allocID:      nm.AllocID,
		addr:         nm.Addr,
		m:            nm,
		kick:         make(chan struct{}, 1),
		stop:         make(chan struct{}),
		verifyReason: reasonUnverified,
	}
	if err := checkAddr(nm.Addr); err != nil {
		m.addrErr = fmt.Sprintf("invalid member address %q: %v", nm.Addr, err)
	}
	m.pool = newConnPool(poolConfig{
		addr:        nm.Addr,
		dialTimeout: r.cfg.DialTimeout,
		maxIdle:     r.cfg.MaxIdleConnsPerMember,
		idleTimeout: r.cfg.IdleTimeout,
		now:         r.cfg.Now,
	})
	return m
}

// checkAddr accepts "host:port" with a non-empty host and a port 1-65535.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("empty host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not 1-65535", port)
	}
	return nil
}

// kickVerify asks the verifier to check the member now (non-blocking).
func (m *member) kickVerify() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// stopVerifier stops the member's verifier; called under Router.mu.
func (m *member) stopVerifier() {
	if !m.stopped {
		m.stopped = true
		close(m.stop)
	}
}

// decision is one member's admission.
type decision struct {
	admitted bool
	reason   string
}

// admit decides the admission of all (sorted by Index). Only members whose
// checks pass and that are live-verified are candidates; the reference
// identity is the one the most candidates hold, ties to the identity of
// the candidate with the lowest Index (the first in all). Candidates with
// another identity are refused with a reason naming the first differing
// field. admit is a pure function of the members' fields.
func admit(all []*member) []decision {
	out := make([]decision, len(all))
	counts := make(map[structs.EndpointIdentity]int)
	var order []structs.EndpointIdentity // first appearance, i.e. lowest Index
	for i, m := range all {
		switch {
		case m.addrErr != "":
			out[i].reason = m.addrErr
		case !m.m.ChecksPassing:
			out[i].reason = reasonChecksFailing
		case !m.verified:
			out[i].reason = m.verifyReason
		default:
			out[i].admitted = true // a candidate, for now
			if counts[m.m.Identity] == 0 {
				order = append(order, m.m.Identity)
			}
			counts[m.m.Identity]++
		}
	}
	if len(order) == 0 {
		return out
	}
	ref := order[0]
	for _, id := range order[1:] {
		if counts[id] > counts[ref] {
			ref = id
		}
	}
	for i, m := range all {
		if out[i].admitted && m.m.Identity != ref {
			out[i] = decision{reason: identityReason(m.m.Identity, ref)}
		}
	}
	return out
}

// identityReason names the first field of id that differs from ref, the
// identity of the admitted members.
func identityReason(id, ref structs.EndpointIdentity) string {
	switch {
	case id.JobVersion != ref.JobVersion:
		return fmt.Sprintf("job version %d differs from the admitted members' %d", id.JobVersion, ref.JobVersion)
	case id.ArtifactDigest != ref.ArtifactDigest:
		return fmt.Sprintf("artifact (image or binary) digest %s differs from the admitted members' %s",
			shortDigest(id.ArtifactDigest), shortDigest(ref.ArtifactDigest))
	default:
		return fmt.Sprintf("config digest %s differs from the admitted members' %s",
			shortDigest(id.ConfigDigest), shortDigest(ref.ConfigDigest))
	}
}

// shortDigest keeps a reason readable: the first 19 bytes of a digest
// ("sha256:" and 12 hex digits), quoted, or "(none)".
func shortDigest(d string) string {
	if d == "" {
		return "(none)"
	}
	if len(d) > 19 {
		d = d[:19] + "…"
	}
	return strconv.Quote(d)
}

// startVerifierLocked starts m's verifier goroutine once.
func (r *Router) startVerifierLocked(m *member) {
	if m.verifying || m.stopped || m.addrErr != "" {
		return
	}
	m.verifying = true
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.verifyLoop(r.bgCtx, m)
	}()
}

// verifyLoop verifies m at once, then every VerifyInterval and whenever
// kicked (a dial to it failed, its identity changed), until stopped.
func (r *Router) verifyLoop(ctx context.Context, m *member) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case <-t.C:
		case <-m.kick:
		}
		r.verifyOnce(ctx, m)
		m.pool.sweep()
		t.Reset(r.cfg.VerifyInterval)
	}
}

// verifyOnce checks m's models listing and applies the result unless m
// changed meanwhile.
func (r *Router) verifyOnce(ctx context.Context, m *member) {
	r.mu.Lock()
	gen, addr := m.gen, m.m.Addr
	r.mu.Unlock()
	err := r.checkModels(ctx, addr)
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.removed || m.gen != gen {
		return
	}
	m.lastVerified = r.cfg.Now()
	if err != nil {
		if m.verified {
			r.log.Warn("member failed live verification", "alloc_id", m.m.AllocID, "addr", addr, "error", err)
		}
		m.verified, m.verifyReason = false, err.Error()
	} else {
		m.verified, m.verifyReason = true, ""
	}
	r.recomputeLocked()
}
