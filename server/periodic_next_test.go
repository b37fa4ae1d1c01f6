package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestPeriodicPassWalksCronsOnlyWhenSomethingChanged: the leader's
// launcher wakes at least every second; it walked every cron of every
// active periodic job on each pass, and 32 crons that never fire ("0 0 30 2
// *": February 30th) cost about 2 ms a job, so a few hundred such jobs
// kept a core busy. A job's next cron time is now computed once and walked
// again only when the job or its recorded launch changes, or the clock
// reaches it.
func TestPeriodicPassWalksCronsOnlyWhenSomethingChanged(t *testing.T) {
	f, err := fsm.New(fsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	s := &Server{fsm: f, config: &Config{PeriodicClock: func() time.Time { return now }}}
	never := statetest.BatchJob(0)
	never.ID, never.Name = "never", "never"
	never.Periodic = &structs.PeriodicConfig{Enabled: true, SpecType: structs.PeriodicSpecCron,
		Specs: slices.Repeat([]string{"0 0 30 2 *"}, structs.MaxPeriodicSpecs)}
	later := statetest.BatchJob(0)
	later.ID, later.Name = "later", "later"
	later.Periodic = &structs.PeriodicConfig{Enabled: true, SpecType: structs.PeriodicSpecCron, Spec: "0 0 1 1 * 2099"}
	for i, j := range []*structs.Job{never, later} {
		j.SubmitTime = now.Add(-time.Minute).UnixNano()
		if err := f.State().UpsertJob(uint64(10+i), j); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	orig := periodicDueFn
	t.Cleanup(func() { periodicDueFn = orig })
	periodicDueFn = func(j *structs.Job, rec *structs.PeriodicLaunch, at time.Time) (time.Time, time.Time, error) {
		calls++
		return orig(j, rec, at)
	}
	nexts := map[string]periodicNext{}
	pass := func() {
		t.Helper()
		if _, err := s.periodicPass(context.Background(), memdb.NewWatchSet(), hclog.NewNullLogger(), nexts); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if calls != 2 {
		t.Fatalf("first pass walked %d jobs' crons, want 2", calls)
	}
	for range 5 {
		now = now.Add(time.Second)
		pass()
	}
	if calls != 2 {
		t.Fatalf("5 more passes with nothing changed walked crons %d more times, want none", calls-2)
	}
	// A change to the job is noticed.
	upd := never.Copy()
	upd.Periodic.Specs = []string{"0 0 1 1 * 2099"}
	if err := f.State().UpsertJob(20, upd); err != nil {
		t.Fatal(err)
	}
	pass()
	if calls != 3 {
		t.Fatalf("after the job changed: %d walks, want 3", calls)
	}
	// A job no longer active is forgotten.
	stopped := later.Copy()
	stopped.Stop = true
	if err := f.State().UpsertJob(21, stopped); err != nil {
		t.Fatal(err)
	}
	pass()
	if _, ok := nexts["later"]; ok || len(nexts) != 1 {
		t.Fatalf("next times kept %v, want only job never's", nexts)
	}
}
