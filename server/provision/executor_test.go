package provision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestSlowProviderDoesNotSlowOtherPools: pool "slow"'s provider holds its
// creates; Step returns at once, and pool "fast" gets its hosts meanwhile.
func TestSlowProviderDoesNotSlowOtherPools(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, gpuPool("slow", 1, 2), gpuPool("fast", 1, 2))
	release := make(chan struct{})
	h.provs["slow"].block = release
	h.warm(ctx)
	// Steps return while the slow create is held.
	done := make(chan struct{})
	go func() {
		for i := 0; i < 5; i++ {
			h.p.Step(ctx)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Step waited on a slow provider")
	}
	waittest.Until(t, 10*time.Second, "fast pool's host", func() bool {
		h.p.Step(ctx)
		hosts, _ := h.provs["fast"].count()
		return hosts == 1
	})
	// The slow create runs in its own goroutine, which may not have
	// reached the provider yet when the fast host is there: wait for it,
	// then check more steps do not repeat it.
	waittest.Until(t, 10*time.Second, "slow pool's create call", func() bool {
		_, creates := h.provs["slow"].count()
		return creates >= 1
	})
	for i := 0; i < 5; i++ {
		h.p.Step(ctx)
	}
	if hosts, creates := h.provs["slow"].count(); hosts != 0 || creates != 1 {
		t.Fatalf("slow pool: %d hosts, %d creates (want 0 and 1: one call in flight, not repeated)", hosts, creates)
	}
	close(release)
	h.p.wg.Wait()
	waittest.Until(t, 10*time.Second, "slow pool's host", func() bool {
		h.step(ctx)
		hosts, _ := h.provs["slow"].count()
		return hosts == 1
	})
}

// TestFailingProviderBacksOff: a failing create records the error on the
// request (and so on the pool's status), is retried only after its
// backoff, with growing delays, and gives up after MaxAttempts without a
// crash loop.
func TestFailingProviderBacksOff(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 1, 1)
	h := newHarness(t, pool)
	fp := h.provs["gpu"]
	fp.fail = errors.New(`exec provider: script exited 1: "quota exceeded"`)
	h.step(ctx)
	_, creates := fp.count()
	r := h.requests("gpu")[0]
	if creates != 1 || r.Status != structs.ProvisionStatusFailed || r.Attempts != 1 || !strings.Contains(r.Error, "quota exceeded") {
		t.Fatalf("after one failure: creates %d, request %+v", creates, r)
	}
	first := time.Duration(r.NextAttempt - h.clock().UnixNano())
	if first < time.Second || first > time.Second+time.Second/4 {
		t.Fatalf("first backoff %s, want 1s..1.25s", first)
	}
	// Steps before the backoff passes make no call.
	for i := 0; i < 5; i++ {
		h.step(ctx)
	}
	if _, c := fp.count(); c != 1 {
		t.Fatalf("retried before the backoff: %d creates", c)
	}
	h.advance(first)
	h.step(ctx)
	r = h.requests("gpu")[0]
	second := time.Duration(r.NextAttempt - h.clock().UnixNano())
	if r.Attempts != 2 || second < 2*time.Second {
		t.Fatalf("second attempt: %+v, backoff %s (want >= 2s)", r, second)
	}
	h.advance(second)
	h.step(ctx)
	r = h.requests("gpu")[0]
	if r.Status != structs.ProvisionStatusCanceled || r.Attempts != 3 || !strings.Contains(r.Error, "gave up after 3 attempts") {
		t.Fatalf("after MaxAttempts: %+v", r)
	}
	st, err := BuildPoolStatus(h.fsm.State(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Failed) == 0 || !strings.Contains(st.Failed[0].Error, "quota exceeded") {
		t.Fatalf("pool status failed calls = %+v", st.Failed)
	}
	if got := testutilCount(t, h.p.cfg.Metrics, "gpu", "create"); got != 3 {
		t.Fatalf("failure counter = %v, want 3", got)
	}
}

// TestBackoffCappedAndDeterministic: the delay doubles up to BackoffMax
// (plus at most a quarter) and is the same for the same request and
// attempt.
func TestBackoffCappedAndDeterministic(t *testing.T) {
	h := newHarness(t)
	for n := 1; n <= 20; n++ {
		d := h.p.backoff("req", n)
		if d != h.p.backoff("req", n) {
			t.Fatal("backoff is not deterministic")
		}
		if d > 10*time.Second {
			t.Fatalf("attempt %d: backoff %s above the cap 8s+25%%", n, d)
		}
	}
}

// TestDuplicateAnswersDropped: a provider answer read at an older index
// (the request changed meanwhile: here, reconcile completed it) is
// dropped by the FSM's compare-and-set and counted; the host is not
// made twice.
func TestDuplicateAnswersDropped(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 1, 1)
	h := newHarness(t, pool)
	h.step(ctx)
	r := h.requests("gpu")[0]
	if r.Status != structs.ProvisionStatusComplete {
		t.Fatalf("request = %+v", r)
	}
	// Replay the answer the executor applied (read at CreateIndex).
	ok, err := h.p.applyResult(&structs.ProvisionResultRequest{ID: r.ID, ExpectedIndex: r.CreateIndex, Status: structs.ProvisionStatusFailed, Error: "late", Attempts: 1})
	if err != nil || ok {
		t.Fatalf("replayed answer applied=%v err=%v", ok, err)
	}
	if got := h.requests("gpu")[0]; got.Status != structs.ProvisionStatusComplete || got.Error != "" {
		t.Fatalf("a stale answer overwrote the request: %+v", got)
	}
	if h.fsm.StaleProvisionResults() != 1 {
		t.Fatalf("stale count = %d", h.fsm.StaleProvisionResults())
	}
	if hosts, creates := h.provs["gpu"].count(); hosts != 1 || creates != 1 {
		t.Fatalf("hosts %d creates %d", hosts, creates)
	}
}
