package provision

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestScaleUpReasonOneEval: the reason of a decision for one blocked
// evaluation reads in the singular ("1 blocked eval needs").
func TestScaleUpReasonOneEval(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, gpuPool("gpu", 0, 4))
	h.blockJob("gpu", 1, 1, false)
	h.step(ctx)
	reqs := h.requests("gpu")
	if want := "1 blocked eval needs nvidia/gpu x 1: +1"; len(reqs) != 1 || reqs[0].Reason != want {
		t.Fatalf("requests = %+v, want one with reason %q", reqs, want)
	}
}

// TestScaleUpFromBlockedEvals: two blocked one-GPU jobs of the pool make
// one decision of two hosts, with the reason naming the need; the hosts
// are created, and a second step adds nothing (they are coming).
func TestScaleUpFromBlockedEvals(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 4)
	pool.Scaling.Shape.NodeClass = "a100"
	h := newHarness(t, pool)
	for i := 0; i < 2; i++ {
		job := h.blockJob("gpu", 1, 1, false)
		_ = job
	}
	// A job of another pool, and one asking for more GPUs than a host
	// has, add nothing.
	h.blockJob("default", 1, 1, false)
	h.blockJob("gpu", 2, 1, false)
	h.step(ctx)
	reqs := h.requests("gpu")
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	want := "2 blocked evals need nvidia/gpu x 1: +2"
	for _, r := range reqs {
		if r.Reason != want || r.Op != structs.ProvisionOpCreate || r.IdempotencyKey == "" || r.NodeName == "" {
			t.Fatalf("request = %+v, want reason %q", r, want)
		}
		if r.CreateIndex != reqs[0].CreateIndex {
			t.Fatal("one decision was split over entries")
		}
	}
	h.settle(ctx)
	if hosts, creates := h.provs["gpu"].count(); hosts != 2 || creates != 2 {
		t.Fatalf("hosts %d creates %d, want 2 and 2", hosts, creates)
	}
	h.advance(time.Hour) // past any cooldown
	h.step(ctx)
	if n := len(h.requests("gpu")); n != 2 {
		t.Fatalf("a second step decided again: %d requests (hosts not joined yet are coming)", n)
	}
	st, err := BuildPoolStatus(h.fsm.State(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if st.Hosts != 2 || len(st.Decisions) != 1 || st.Decisions[0].Reason != want || st.Decisions[0].Count != 2 || len(st.Nodes) != 2 || st.Nodes[0].State != structs.PoolNodeJoining {
		t.Fatalf("status = %+v", st)
	}
}

// TestScaleUpBoundsAndCooldown: demand beyond Max is capped and says so;
// nothing more is decided within the cooldown, and after it only what
// Max still allows.
func TestScaleUpBoundsAndCooldown(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 3)
	pool.Scaling.Cooldown = 5 * time.Minute
	h := newHarness(t, pool)
	for i := 0; i < 5; i++ {
		h.blockJob("gpu", 1, 1, false)
	}
	h.step(ctx)
	reqs := h.requests("gpu")
	if len(reqs) != 3 || !strings.Contains(reqs[0].Reason, "5 blocked evals need nvidia/gpu x 1: +3 (capped at max 3)") {
		t.Fatalf("requests = %d, reason %q", len(reqs), reqs[0].Reason)
	}
	// Lower the pool to one host, more work arrives: within the cooldown
	// nothing happens.
	h.blockJob("gpu", 1, 1, false)
	h.advance(time.Minute)
	h.step(ctx)
	if n := len(h.requests("gpu")); n != 3 {
		t.Fatalf("decided within the cooldown: %d requests", n)
	}
	h.advance(5 * time.Minute)
	h.step(ctx)
	if n := len(h.requests("gpu")); n != 3 {
		t.Fatalf("went past max: %d requests", n)
	}
}

// TestScaleUpMin tops a pool up to Min without blocked work.
func TestScaleUpMin(t *testing.T) {
	h := newHarness(t, gpuPool("gpu", 2, 4))
	h.step(context.Background())
	reqs := h.requests("gpu")
	if len(reqs) != 2 || reqs[0].Reason != "pool below min 2: +2" {
		t.Fatalf("requests = %+v", reqs)
	}
}

// TestGangAllOrNothing: a 4-node gang gets 4 requests with one GroupKey
// when Max allows it, none when it does not; a second step adds no
// second set.
func TestGangAllOrNothing(t *testing.T) {
	ctx := context.Background()
	small := gpuPool("small", 0, 3)
	big := gpuPool("big", 0, 8)
	h := newHarness(t, small, big)
	h.blockJob("small", 1, 4, true)
	h.blockJob("big", 1, 4, true)
	h.step(ctx)
	if n := len(h.requests("small")); n != 0 {
		t.Fatalf("a 4-node gang in a pool of max 3 got %d requests", n)
	}
	reqs := h.requests("big")
	if len(reqs) != 4 {
		t.Fatalf("gang requests = %d, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.GroupKey == "" || r.GroupKey != reqs[0].GroupKey || !strings.HasPrefix(r.Reason, "gang of 4 needs nvidia/gpu x 1: +4") {
			t.Fatalf("request = %+v", r)
		}
	}
	h.settle(ctx)
	h.advance(time.Hour)
	h.step(ctx)
	if n := len(h.requests("big")); n != 4 {
		t.Fatalf("second gang set: %d requests", n)
	}
}

// TestGangPartialSetTornDown: when one member of a gang fails for good,
// the members made are terminated and none is left: no half-made set.
func TestGangPartialSetTornDown(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 8)
	h2 := newHarness(t, pool)
	fp := h2.provs["gpu"]
	// Record the set without dispatching, then make one key fail.
	if err := h2.p.recordCreates(pool, scaleUp{count: 4, groupKey: "gang/test", reason: "gang of 4"}, h2.clock()); err != nil {
		t.Fatal(err)
	}
	set := h2.requests("gpu")
	fp.mu.Lock()
	fp.failKey = map[string]bool{set[2].IdempotencyKey: true}
	fp.mu.Unlock()
	waittest.Until(t, 10*time.Second, "gang torn down", func() bool {
		h2.advance(time.Minute) // past every backoff
		h2.step(ctx)
		hosts, _ := fp.count()
		for _, r := range h2.requests("gpu") {
			if !r.Finished() {
				return false
			}
		}
		return hosts == 0
	})
	canceled := 0
	for _, r := range h2.requests("gpu") {
		if r.Op == structs.ProvisionOpCreate && r.Status == structs.ProvisionStatusCanceled {
			canceled++
		}
	}
	if canceled == 0 {
		t.Fatal("no member recorded as failed for good")
	}
	if hosts, _ := fp.count(); hosts != 0 {
		t.Fatalf("%d hosts of a failed gang left", hosts)
	}
}

// TestPoolWaitingNamesWhatGetsNoHosts: a group asking more GPUs than a
// host has, a gang larger than Max leaves room for and demand beyond Max
// are each named in the pool's status, with nothing decided for the first
// two; a pool with room for all of it waits for nothing.
func TestPoolWaitingNamesWhatGetsNoHosts(t *testing.T) {
	ctx := context.Background()
	pool := gpuPool("gpu", 0, 3)
	h := newHarness(t, pool)
	big := h.blockJob("gpu", 2, 1, false) // 2 GPUs an allocation; a host has 1
	h.blockJob("gpu", 1, 4, true)         // a gang of 4 in a pool of max 3
	for range 5 {
		h.blockJob("gpu", 1, 1, false) // 5 hosts wanted, 3 allowed
	}
	waits, err := PoolWaiting(h.fsm.State(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if waits[0].Namespace != big.Namespace || waits[1].Namespace != "" || waits[2].Namespace != "" {
		t.Fatalf("namespaces of the lines: %+v; want the job's on the line naming it only", waits)
	}
	got := waitReasons(waits)
	want := []string{
		`job "` + big.ID + `" group "web" asks 2 GPUs an allocation, a host of this pool has 1: no host of this pool can place it`,
		"gang of 4 needs nvidia/gpu x 1 all at once: max 3 leaves room for 3",
		"5 blocked evals need nvidia/gpu x 1: 2 more hosts than max 3 allows",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("waiting:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h.step(ctx)
	reqs := h.requests("gpu")
	if len(reqs) != 3 || !strings.Contains(reqs[0].Reason, "+3 (capped at max 3)") {
		t.Fatalf("requests = %d (%+v), want the 3 one-GPU hosts only", len(reqs), reqs)
	}
	// Once max is reached the gang's room is 0.
	waits, err = PoolWaiting(h.fsm.State(), pool)
	if err != nil {
		t.Fatal(err)
	}
	got = waitReasons(waits)
	if len(got) != 3 || got[1] != "gang of 4 needs nvidia/gpu x 1 all at once: max 3 leaves room for 0" {
		t.Fatalf("waiting after scale-up: %q", got)
	}

	roomy := gpuPool("roomy", 0, 8)
	h2 := newHarness(t, roomy)
	h2.blockJob("roomy", 1, 2, false)
	if got, err := PoolWaiting(h2.fsm.State(), roomy); err != nil || len(got) != 0 {
		t.Fatalf("a pool with room waits for %q (%v)", got, err)
	}
	if got, err := PoolWaiting(h2.fsm.State(), &structs.NodePool{Name: "plain"}); err != nil || got != nil {
		t.Fatalf("a pool without scaling waits for %q (%v)", got, err)
	}
}

// TestAnyPoolJobCountedByOnePool: a blocked job with node_pool = "all"
// makes hosts in one scaling pool only (the first by name whose shape fits
// it), not in every pool; one that only the second pool's shape fits goes
// there.
func TestAnyPoolJobCountedByOnePool(t *testing.T) {
	ctx := context.Background()
	a, b := gpuPool("a-pool", 0, 4), gpuPool("b-pool", 0, 4)
	b.Scaling.Shape.GPUCount = 4
	h := newHarness(t, a, b)
	h.blockJob(structs.NodePoolAll, 1, 2, false)
	h.step(ctx)
	if na, nb := len(h.requests("a-pool")), len(h.requests("b-pool")); na != 2 || nb != 0 {
		t.Fatalf("one-GPU job in pool all: a-pool %d requests, b-pool %d; want 2 and 0", na, nb)
	}
	h.blockJob(structs.NodePoolAll, 3, 1, false) // only b-pool's hosts have 3 GPUs
	h.advance(time.Hour)
	h.step(ctx)
	if na, nb := len(h.requests("a-pool")), len(h.requests("b-pool")); na != 2 || nb != 1 {
		t.Fatalf("three-GPU job in pool all: a-pool %d requests, b-pool %d; want 2 and 1", na, nb)
	}
}

// waitReasons returns the reasons of ws.
func waitReasons(ws []structs.PoolWait) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Reason)
	}
	return out
}

// TestPoolWaitingLinesBounded (hostile17): a job's device name is only
// bounded by the request body, and the reasons of demand held at max
// quote it; each Waiting line stays within MaxProvisionReasonLen bytes,
// and many blocked jobs give at most MaxPoolDecisions lines.
func TestPoolWaitingLinesBounded(t *testing.T) {
	pool := gpuPool("gpu", 0, 1)
	h := newHarness(t, pool)
	for i := range structs.MaxPoolDecisions + 5 {
		job := statetest.BatchJob(1)
		job.NodePool = "gpu"
		// A vendor of 64 KiB: a distinct key (and so a distinct line)
		// for each job.
		job.TaskGroups[0].Tasks[0].Resources.Devices[0].Name = strings.Repeat("v", 64<<10) + fmt.Sprint(i) + "/gpu"
		job.TaskGroups[0].Count = 2
		job.TaskGroups[0].Gang = i%2 == 0
		h.must(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
		e := statetest.Eval(job)
		e.Status = structs.EvalStatusBlocked
		e.FailedTGAllocs = map[string]*structs.AllocMetric{"web": {CoalescedFailures: 1}}
		h.must(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{e}})
	}
	got, err := PoolWaiting(h.fsm.State(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) > structs.MaxPoolDecisions {
		t.Fatalf("%d lines, want 1 to %d", len(got), structs.MaxPoolDecisions)
	}
	for i, w := range got {
		if len(w.Reason) > structs.MaxProvisionReasonLen || !utf8.ValidString(w.Reason) {
			t.Errorf("line %d: %d bytes (valid UTF-8: %v), want at most %d", i, len(w.Reason), utf8.ValidString(w.Reason), structs.MaxProvisionReasonLen)
		}
	}
}
