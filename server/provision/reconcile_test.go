package provision

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestFailoverReconcile: a new leader finds a pending create whose host
// the old leader's call made (the answer was never recorded): it
// completes the request with that host and calls Create no more. A host
// of the pool no record names is an orphan: terminated by default.
func TestFailoverReconcile(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 3)
	h := newHarness(t, pool)
	// The old leader recorded 3 creates and died mid-call: two hosts were
	// made (one of them listed, the third never started).
	if err := h.p.recordCreates(pool, scaleUp{count: 3, reason: "3 blocked evals need nvidia/gpu x 1: +3"}, h.clock()); err != nil {
		t.Fatal(err)
	}
	reqs := h.requests("gpu")
	fp := h.provs["gpu"]
	fp.addHost(Host{ID: "made-0", Pool: "gpu", IdempotencyKey: reqs[0].IdempotencyKey, NodeName: reqs[0].NodeName})
	fp.addHost(Host{ID: "made-1", Pool: "gpu", IdempotencyKey: reqs[1].IdempotencyKey, NodeName: reqs[1].NodeName})
	fp.addHost(Host{ID: "stray", Pool: "gpu", IdempotencyKey: "someone-elses", NodeName: "gpu-stray"})
	h.settle(ctx)
	hosts, creates := fp.count()
	if hosts != 3 || creates != 1 {
		t.Fatalf("hosts %d creates %d, want exactly 3 hosts and one Create (for the host never made)", hosts, creates)
	}
	byID := map[string]*structs.ProvisionRequest{}
	for _, r := range h.requests("gpu") {
		byID[r.ID] = r
	}
	if r := byID[reqs[0].ID]; r.Status != structs.ProvisionStatusComplete || r.HostID != "made-0" {
		t.Fatalf("pending create with a host = %+v", r)
	}
	if _, ok := fp.hosts["stray"]; ok {
		t.Fatal("the orphan host was not terminated")
	}
	found := false
	for _, r := range byID {
		if r.Op == structs.ProvisionOpTerminate && r.HostID == "stray" && strings.Contains(r.Reason, "orphan host stray") {
			found = true
		}
	}
	if !found {
		t.Fatal("no terminate request records the orphan")
	}
	// A second failover: nothing doubles, nothing leaks.
	p2, err := New(h.p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p, h.warmed = p2, false
	h.advance(time.Hour)
	h.settle(ctx)
	if hosts, creates := fp.count(); hosts != 3 || creates != 1 {
		t.Fatalf("after a second failover: hosts %d creates %d", hosts, creates)
	}
}

// TestOrphanAdopt: with Orphans "adopt", an unknown host of the pool is
// recorded as the pool's host instead of terminated; a second host with
// the same key is still terminated (never adopted twice).
func TestOrphanAdopt(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 3)
	pool.Scaling.Orphans = structs.PoolOrphansAdopt
	h := newHarness(t, pool)
	fp := h.provs["gpu"]
	fp.addHost(Host{ID: "a", Pool: "gpu", IdempotencyKey: "k1", NodeName: "gpu-a"})
	fp.addHost(Host{ID: "b", Pool: "gpu", IdempotencyKey: "k1", NodeName: "gpu-b"})
	h.settle(ctx)
	hosts, _ := fp.count()
	if hosts != 1 {
		t.Fatalf("hosts = %d, want 1 (one adopted, its double terminated)", hosts)
	}
	st, err := BuildPoolStatus(h.fsm.State(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if st.Hosts != 1 {
		t.Fatalf("pool hosts = %d, want the adopted one", st.Hosts)
	}
}

// TestReconcileHostGone: a recorded host the provider no longer lists is
// recorded as terminated, so the pool's size is true and Min is topped
// up again.
func TestReconcileHostGone(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 1, 1)
	h := newHarness(t, pool)
	h.settle(ctx)
	fp := h.provs["gpu"]
	fp.mu.Lock()
	for id := range fp.hosts {
		delete(fp.hosts, id)
	}
	fp.mu.Unlock()
	h.advance(time.Hour)
	h.settle(ctx) // reconcile notices
	h.advance(time.Hour)
	h.settle(ctx) // min tops up
	if hosts, creates := fp.count(); hosts != 1 || creates != 2 {
		t.Fatalf("hosts %d creates %d, want 1 and 2", hosts, creates)
	}
}

// TestReconcileHostNotStarted: a pending create whose host exists but is
// not running (the old leader died between making and starting it) is
// not completed by the reconcile: the executor's Create, idempotent on the
// key, finishes the host.
func TestReconcileHostNotStarted(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 1)
	h := newHarness(t, pool)
	if err := h.p.recordCreates(pool, scaleUp{count: 1, reason: "test: +1"}, h.clock()); err != nil {
		t.Fatal(err)
	}
	r := h.requests("gpu")[0]
	fp := h.provs["gpu"]
	fp.addHost(Host{ID: "half", Pool: "gpu", IdempotencyKey: r.IdempotencyKey, NodeName: r.NodeName, State: "created"})
	h.settle(ctx)
	_, creates := fp.count()
	got := h.requests("gpu")[0]
	if creates != 1 || got.Status != structs.ProvisionStatusComplete || got.HostID != "half" {
		t.Fatalf("creates %d, request %+v: want the executor's Create to finish the half-made host", creates, got)
	}
}
