package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// fakeClock is the periodic launcher's injected clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// periodicJob is a batch job launched every minute.
func periodicJob(prohibitOverlap bool) *structs.Job {
	j := statetest.BatchJob(0)
	j.ID = "cron-" + structs.ShortID(structs.GenerateUUID())
	j.Name = j.ID
	j.Periodic = &structs.PeriodicConfig{Enabled: true, Specs: []string{"* * * * *"}, ProhibitOverlap: prohibitOverlap}
	return j
}

// childIDs lists the IDs of parentID's children on s.
func childIDs(t *testing.T, s *server.Server, parentID string) []string {
	t.Helper()
	jobs, _, err := s.JobList(context.Background(), &structs.QueryOptions{Prefix: parentID + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range jobs {
		if j.ParentID == parentID {
			out = append(out, j.ID)
		}
	}
	slices.Sort(out)
	return out
}

// nextMinute is the first whole minute after t.
func nextMinute(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) }

func waitChildren(t *testing.T, s func() *server.Server, parentID string, want ...string) {
	t.Helper()
	slices.Sort(want)
	waittest.For(t, 15*time.Second, fmt.Sprintf("children %v", want), func() (bool, string) {
		srv := s()
		if srv == nil {
			return false, "no server"
		}
		got := childIDs(t, srv, parentID)
		return slices.Equal(got, want), fmt.Sprint(got)
	})
}

// TestPeriodicLaunchesOnScheduleAndOnlyTheLatestMissed: the launcher
// (injected clock) launches each minute's child, named by the cron time; a
// gap of several minutes launches only the most recent missed one; a
// parent gets no allocation and no evaluation; force launches one now.
func TestPeriodicLaunchesOnScheduleAndOnlyTheLatestMissed(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) { c.PeriodicClock = clock.Now }))
	job := periodicJob(false)
	resp, err := s.JobRegister(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if resp.EvalID != "" {
		t.Fatalf("a periodic parent got evaluation %q", resp.EvalID)
	}
	slot1 := nextMinute(time.Unix(0, mustJob(t, s, job.ID).SubmitTime))
	// Before the first cron time nothing launches.
	clock.Set(slot1.Add(-time.Second))
	time.Sleep(1500 * time.Millisecond) // the launcher wakes at least once a second
	if got := childIDs(t, s, job.ID); len(got) != 0 {
		t.Fatalf("launched before the cron time: %v", got)
	}
	clock.Set(slot1.Add(time.Second))
	c1 := structs.PeriodicChildID(job.ID, slot1.Unix())
	waitChildren(t, func() *server.Server { return s }, job.ID, c1)

	// Four minutes pass at once: only the newest missed time launches.
	slot5 := slot1.Add(4 * time.Minute)
	clock.Set(slot5.Add(2 * time.Second))
	c5 := structs.PeriodicChildID(job.ID, slot5.Unix())
	waitChildren(t, func() *server.Server { return s }, job.ID, c1, c5)

	child := mustJob(t, s, c1)
	if child.ParentID != job.ID || child.Periodic != nil || child.Name != c1 {
		t.Fatalf("child %+v: want ParentID %q, no periodic block, Name = ID", child, job.ID)
	}
	if p := mustJob(t, s, job.ID); p.Status != structs.JobStatusRunning {
		t.Fatalf("parent status %q, want running", p.Status)
	}
	if allocs, _, _ := s.JobAllocations(context.Background(), job.ID, nil); len(allocs) != 0 {
		t.Fatalf("parent has %d allocations", len(allocs))
	}

	fr, err := s.PeriodicForce(context.Background(), job.ID)
	if err != nil || fr.EvalID == "" {
		t.Fatalf("force: %+v %v", fr, err)
	}
	forced := structs.PeriodicChildID(job.ID, clock.Now().Unix())
	waitChildren(t, func() *server.Server { return s }, job.ID, c1, c5, forced)
	if _, err := s.PeriodicForce(context.Background(), job.ID); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("a second force in the same second: %v, want ErrInvalid", err)
	}
}

func mustJob(t *testing.T, s *server.Server, id string) *structs.Job {
	t.Helper()
	j, _, err := s.JobGet(context.Background(), id, nil)
	if err != nil {
		t.Fatalf("job %q: %v", id, err)
	}
	return j
}

// TestPeriodicFailoverNoDuplicateNoMissedLaunch: on a 3-server cluster, the
// leader launches minute 1, is killed, and the cron time of minute 2
// passes with no leader; the new leader launches minute 2 (the launch time
// recorded in Raft tells it minute 1 is done) and never minute 1 again.
func TestPeriodicFailoverNoDuplicateNoMissedLaunch(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	c := servertest.NewCluster(t, 3, servertest.WithConfig(func(cfg *server.Config) { cfg.PeriodicClock = clock.Now }))
	job := periodicJob(false)
	c.Register(job)
	leader := func() *server.Server { return c.Server(c.WaitForLeader()) }
	slot1 := nextMinute(time.Unix(0, mustJob(t, leader(), job.ID).SubmitTime))
	clock.Set(slot1.Add(time.Second))
	c1 := structs.PeriodicChildID(job.ID, slot1.Unix())
	waitChildren(t, leader, job.ID, c1)

	old := c.Leader()
	slot2 := slot1.Add(time.Minute)
	clock.Set(slot2.Add(time.Second))
	c.Kill(old)
	waitChildren(t, leader, job.ID, c1, structs.PeriodicChildID(job.ID, slot2.Unix()))
	if c.Leader() == old {
		t.Fatal("the killed server still leads")
	}
	c.Restart(old)
	c.WaitForConvergence(30 * time.Second)
	for i, s := range c.Servers() {
		if got := childIDs(t, s, job.ID); len(got) != 2 {
			t.Fatalf("server %d has children %v, want 2", i, got)
		}
	}
}

// TestPeriodicProhibitOverlapSkipsAndRecords: while a child is alive (no
// node, so its evaluation stays blocked and it stays pending), the next
// cron time launches nothing, and it is recorded so a later leader does
// not launch it late.
func TestPeriodicProhibitOverlapSkipsAndRecords(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) { c.PeriodicClock = clock.Now }))
	job := periodicJob(true)
	if _, err := s.JobRegister(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	slot1 := nextMinute(time.Unix(0, mustJob(t, s, job.ID).SubmitTime))
	clock.Set(slot1.Add(time.Second))
	c1 := structs.PeriodicChildID(job.ID, slot1.Unix())
	waitChildren(t, func() *server.Server { return s }, job.ID, c1)
	slot2 := slot1.Add(time.Minute)
	clock.Set(slot2.Add(time.Second))
	waittest.NoErr(t, 10*time.Second, "slot 2 recorded", func() (bool, error) {
		l, err := s.State().PeriodicLaunchByID(nil, job.ID)
		return l != nil && l.Launch == slot2.Unix(), err
	})
	if got := childIDs(t, s, job.ID); !slices.Equal(got, []string{c1}) {
		t.Fatalf("children %v: prohibit_overlap let a second one launch", got)
	}
}

// parameterizedJob is a batch job that dispatch creates children of.
func parameterizedJob(maxRunning int) *structs.Job {
	j := statetest.BatchJob(0)
	j.ID = "param-" + structs.ShortID(structs.GenerateUUID())
	j.Name = j.ID
	j.ParameterizedJob = &structs.ParameterizedJobConfig{Payload: structs.DispatchPayloadOptional,
		MetaRequired: []string{"input"}, MetaOptional: []string{"mode"}}
	j.MaxRunningChildren = maxRunning
	return j
}

// TestDispatchMaxRunningChildrenHoldsAndReleasesInOrder: with
// max_running_children = 2, five dispatches register two runnable
// children and three held ones; stopping a running child releases the
// oldest held one, never more than the limit.
func TestDispatchMaxRunningChildrenHoldsAndReleasesInOrder(t *testing.T) {
	s := servertest.NewServer(t)
	job := parameterizedJob(2)
	if _, err := s.JobRegister(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 5; i++ {
		r, err := s.JobDispatch(context.Background(), &server.JobDispatchRequest{JobID: job.ID, Meta: map[string]string{"input": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if (r.EvalID == "") != (i >= 2) {
			t.Fatalf("dispatch %d: EvalID %q; want one only for the first two", i, r.EvalID)
		}
		ids = append(ids, r.DispatchedJobID)
	}
	held := func() []bool {
		out := make([]bool, len(ids))
		for i, id := range ids {
			out[i] = mustJob(t, s, id).Held
		}
		return out
	}
	if got := held(); !slices.Equal(got, []bool{false, false, true, true, true}) {
		t.Fatalf("held %v", got)
	}
	if _, err := s.JobDeregister(context.Background(), ids[0], false); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 10*time.Second, "the oldest held child released", func() (bool, string) {
		got := held()
		return slices.Equal(got, []bool{false, false, false, true, true}), fmt.Sprint(got)
	})
	// Still two running at most: nothing else is released.
	time.Sleep(300 * time.Millisecond)
	if got := held(); !slices.Equal(got, []bool{false, false, false, true, true}) {
		t.Fatalf("held %v after the release settled", got)
	}
	if evals, _, _ := s.JobEvaluations(context.Background(), ids[2], nil); len(evals) == 0 {
		t.Fatal("released child has no evaluation")
	}
	if evals, _, _ := s.JobEvaluations(context.Background(), ids[3], nil); len(evals) != 0 {
		t.Fatalf("held child has %d evaluations, want none", len(evals))
	}
}

// TestDispatchIdempotencyTokenAndBadInput: a repeated token names the same
// child; a non-parameterized job, a missing required meta key, an unknown
// key and a payload over 16 KiB are each refused with ErrInvalid naming
// the problem; an unknown job is ErrNotFound.
func TestDispatchIdempotencyTokenAndBadInput(t *testing.T) {
	s := servertest.NewServer(t)
	job := parameterizedJob(0)
	plain := statetest.BatchJob(0)
	for _, j := range []*structs.Job{job, plain} {
		if _, err := s.JobRegister(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	meta := map[string]string{"input": "a"}
	r1, err := s.JobDispatch(ctx, &server.JobDispatchRequest{JobID: job.ID, Meta: meta, IdempotencyToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.JobDispatch(ctx, &server.JobDispatchRequest{JobID: job.ID, Meta: meta, IdempotencyToken: "tok"})
	if err != nil || r2.DispatchedJobID != r1.DispatchedJobID || r2.EvalID != "" {
		t.Fatalf("repeat with the token: %+v %v; want the same child %q and no evaluation", r2, err, r1.DispatchedJobID)
	}
	if !strings.HasPrefix(r1.DispatchedJobID, job.ID+"/dispatch-") {
		t.Fatalf("child ID %q", r1.DispatchedJobID)
	}
	child := mustJob(t, s, r1.DispatchedJobID)
	if !child.Dispatched || child.Meta["input"] != "a" || child.DispatchIdempotencyToken != "tok" {
		t.Fatalf("child %+v", child)
	}
	for name, tc := range map[string]struct {
		req  *server.JobDispatchRequest
		want string
	}{
		"not parameterized": {&server.JobDispatchRequest{JobID: plain.ID}, "is not a parameterized job"},
		"missing meta":      {&server.JobDispatchRequest{JobID: job.ID}, `Meta: missing required key "input"`},
		"unknown meta":      {&server.JobDispatchRequest{JobID: job.ID, Meta: map[string]string{"input": "a", "x": "1"}}, `key "x" is neither`},
		"payload too large": {&server.JobDispatchRequest{JobID: job.ID, Meta: meta, Payload: make([]byte, 16*1024+1)}, "Payload: at most 16384 bytes"},
	} {
		_, err := s.JobDispatch(ctx, tc.req)
		if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalid with %q", name, err, tc.want)
		}
	}
	if _, err := s.JobDispatch(ctx, &server.JobDispatchRequest{JobID: "nope"}); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := s.PeriodicForce(ctx, plain.ID); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("force of a non-periodic job: %v", err)
	}
	bad := periodicJob(false)
	bad.Periodic.Specs = []string{"61 * * * *"}
	if _, err := s.JobRegister(ctx, bad); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "periodic: crons:") {
		t.Errorf("invalid cron: %v", err)
	}
	forged := statetest.BatchJob(0)
	forged.ParentID = "x"
	if _, err := s.JobRegister(ctx, forged); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "ParentID") {
		t.Errorf("registration with ParentID: %v", err)
	}
}

// TestPeriodicRestartLaunchesTheLatestMissedOnce: a single server that was
// down for two cron times launches, on its restart, only the newer of them
// (Nomad's rule), and minute 1 is not launched again.
func TestPeriodicRestartLaunchesTheLatestMissedOnce(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	c := servertest.NewCluster(t, 1, servertest.WithConfig(func(cfg *server.Config) { cfg.PeriodicClock = clock.Now }))
	job := periodicJob(false)
	c.Register(job)
	srv := func() *server.Server { return c.Server(c.WaitForLeader()) }
	slot1 := nextMinute(time.Unix(0, mustJob(t, srv(), job.ID).SubmitTime))
	clock.Set(slot1.Add(time.Second))
	c1 := structs.PeriodicChildID(job.ID, slot1.Unix())
	waitChildren(t, srv, job.ID, c1)
	c.Kill(0)
	slot3 := slot1.Add(2 * time.Minute)
	clock.Set(slot3.Add(5 * time.Second))
	c.Restart(0)
	waitChildren(t, srv, job.ID, c1, structs.PeriodicChildID(job.ID, slot3.Unix()))
	time.Sleep(1500 * time.Millisecond) // a launcher pass or more
	if got := childIDs(t, srv(), job.ID); len(got) != 2 {
		t.Fatalf("children %v after the restart settled, want 2", got)
	}
}

// TestHeldChildrenCapped: a parent with max_running_children keeps at most
// Config.MaxHeldChildren children held. Past it a dispatch and a forced
// launch are refused naming why, and a scheduled launch waits (nothing is
// launched or recorded); held children are never garbage-collected, so a
// cron firing every second behind one long child grew the state without
// bound.
func TestHeldChildrenCapped(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.PeriodicClock = clock.Now
		c.MaxHeldChildren = 2
	}))
	job := parameterizedJob(1)
	if _, err := s.JobRegister(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	dispatch := func(i int) (*server.JobDispatchResponse, error) {
		return s.JobDispatch(context.Background(), &server.JobDispatchRequest{JobID: job.ID, Meta: map[string]string{"input": fmt.Sprint(i)},
			IdempotencyToken: fmt.Sprint("tok-", i)})
	}
	for i := range 3 { // one runs, two are held
		if _, err := dispatch(i); err != nil {
			t.Fatal(err)
		}
	}
	_, err := dispatch(3)
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "2 held children waiting") {
		t.Fatalf("dispatch past the held cap: %v", err)
	}
	// A repeated token still names its child.
	if r, err := dispatch(1); err != nil || r.DispatchedJobID == "" {
		t.Fatalf("repeated token: %+v, %v", r, err)
	}

	pj := periodicJob(false)
	pj.MaxRunningChildren = 1
	if _, err := s.JobRegister(context.Background(), pj); err != nil {
		t.Fatal(err)
	}
	slot := nextMinute(time.Unix(0, mustJob(t, s, pj.ID).SubmitTime))
	var want []string
	for i := range 3 { // slot 0 runs, slots 1 and 2 are held
		at := slot.Add(time.Duration(i) * time.Minute)
		clock.Set(at.Add(time.Second))
		want = append(want, structs.PeriodicChildID(pj.ID, at.Unix()))
		waitChildren(t, func() *server.Server { return s }, pj.ID, want...)
	}
	if _, err := s.PeriodicForce(context.Background(), pj.ID); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "held children") {
		t.Fatalf("forced launch past the held cap: %v", err)
	}
	full := slot.Add(3 * time.Minute)
	clock.Set(full.Add(time.Second))
	// Give the launcher passes to (wrongly) launch slot 3; it wakes at
	// least every second.
	time.Sleep(2500 * time.Millisecond)
	if got := childIDs(t, s, pj.ID); !slices.Equal(got, want) {
		t.Fatalf("children %v past the held cap, want %v", got, want)
	}
	if l, err := s.State().PeriodicLaunchByID(nil, pj.ID); err != nil || l == nil || l.Launch >= full.Unix() {
		t.Fatalf("launch record %+v, %v: a skipped slot was recorded", l, err)
	}
}
