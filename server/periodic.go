package server

import (
	"context"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"
)

// The leader's periodic launcher. Only the leader reads a clock to decide
// launches; the decision (the cron time) travels in the Raft entry, and
// the FSM dedupes by child ID ("<job>/periodic-<unix>") and by the
// recorded last launch, so a new leader that decides the same time again
// changes nothing.
//
// Missed launches: a leader that finds cron times that passed since the
// last recorded launch (it was elected after them, or the cluster was
// down) launches only the most recent of them, as Nomad does, and then
// follows the schedule. A cron time before the job's latest registration
// (SubmitTime) is never launched.

const (
	// periodicMaxWait bounds one wait of the launcher, so a clock that
	// jumps (an injected one in tests, or NTP) is noticed within it.
	periodicMaxWait = time.Second
	// periodicRetry is the pause after a launch that failed.
	periodicRetry = time.Second
	// periodicMaxScan bounds the cron times walked to find the most
	// recent missed one; past it the walk restarts one hour before now.
	periodicMaxScan = 10_000
)

// periodicLoop launches the children of every active periodic job at
// their cron times until ctx ends (leadership lost).
func (s *Server) periodicLoop(ctx context.Context) {
	log := s.logger.Named("periodic")
	nexts := map[string]periodicNext{}
	for ctx.Err() == nil {
		ws := memdb.NewWatchSet()
		wait, err := s.periodicPass(ctx, ws, log, nexts)
		if err != nil && ctx.Err() == nil {
			log.Warn("periodic launch pass failed", "error", err)
			wait = periodicRetry
		}
		waitChange(ctx, ws, wait)
	}
}

// periodicNext is the next cron time the launcher computed for a job, and
// what it was computed from: the job's ModifyIndex and its recorded last
// launch. Until either changes or the clock reaches next, nothing of the
// job is due, and its crons are not walked again (32 crons that never
// fire cost about 2 ms a job, every pass).
type periodicNext struct {
	modifyIndex uint64
	lastLaunch  int64
	next        time.Time // zero: no cron fires again
}

// periodicPass launches what is due and returns how long to wait before
// the next cron time (at most periodicMaxWait), or 0 when no periodic job
// is active (the loop then waits for a change). ws watches the jobs and
// launch tables. nexts caches each active job's next cron time across
// passes; jobs no longer active are dropped from it.
func (s *Server) periodicPass(ctx context.Context, ws memdb.WatchSet, log hclog.Logger, nexts map[string]periodicNext) (time.Duration, error) {
	st := s.fsm.State()
	// A snapshot restore replaces the store: wake up and read the new one.
	ws.Add(st.AbandonCh())
	jobs, err := st.Jobs(ws)
	if err != nil {
		return 0, err
	}
	if _, err := st.PeriodicLaunches(ws); err != nil {
		return 0, err
	}
	wait, active := periodicMaxWait, false
	var firstErr error
	seen := map[string]bool{}
	defer func() {
		for id := range nexts {
			if !seen[id] {
				delete(nexts, id)
			}
		}
	}()
	for _, j := range jobs {
		if ctx.Err() != nil {
			return wait, nil
		}
		if !j.IsPeriodicActive() {
			continue
		}
		active = true
		seen[j.ID] = true
		rec, err := st.PeriodicLaunchByID(nil, j.ID)
		if err != nil {
			return 0, err
		}
		var last int64
		if rec != nil {
			last = rec.Launch
		}
		now := s.periodicNow()
		if c, ok := nexts[j.ID]; ok && c.modifyIndex == j.ModifyIndex && c.lastLaunch == last && (c.next.IsZero() || now.Before(c.next)) {
			if !c.next.IsZero() {
				wait = min(wait, max(c.next.Sub(now), time.Millisecond))
			}
			continue
		}
		due, next, err := periodicDueFn(j, rec, now)
		if err != nil {
			log.Warn("periodic job has a bad schedule", "job_id", j.ID, "error", err)
			continue
		}
		if due.IsZero() {
			nexts[j.ID] = periodicNext{modifyIndex: j.ModifyIndex, lastLaunch: last, next: next}
		} else {
			delete(nexts, j.ID)
		}
		if !due.IsZero() && s.heldQueueFull(j) != nil {
			// The held queue is full: launch nothing and record nothing;
			// once children have run, the most recent missed time is
			// launched, as after a leader's absence.
			due = time.Time{}
		}
		if !due.IsZero() {
			res, _, _, err := s.launchPeriodic(j, due.Unix(), false)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			log.Info("periodic launch", "job_id", j.ID, "launch", due.Unix(), "child", res.JobID,
				"created", res.Created, "held", res.Held, "skipped", res.Skipped)
		}
		if !next.IsZero() {
			if d := next.Sub(now); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
	}
	if !active && firstErr == nil {
		return 0, nil
	}
	return wait, firstErr
}

// periodicDueFn is periodicDue; tests count its calls.
var periodicDueFn = periodicDue

// periodicDue returns the cron time of job to launch now (the most recent
// one after both the recorded last launch rec and the job's SubmitTime, at
// or before now; zero when none) and the next cron time after now (zero
// when there is none).
func periodicDue(job *structs.Job, rec *structs.PeriodicLaunch, now time.Time) (due, next time.Time, err error) {
	base := time.Unix(0, job.SubmitTime)
	if rec != nil && rec.Launch >= base.Unix() {
		base = time.Unix(rec.Launch, 0)
	}
	t := base
	for i := 0; ; i++ {
		if i == periodicMaxScan {
			// Frequent crons and a long gap: the most recent time is
			// within the last hour for any cron that fires this often.
			t, due = now.Add(-time.Hour), time.Time{}
			if t.Before(base) {
				t = base
			}
		}
		n, err := job.Periodic.Next(t)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		if n.IsZero() || n.After(now) {
			return due, n, nil
		}
		due, t = n, n
		if i > 2*periodicMaxScan {
			return due, time.Time{}, nil
		}
	}
}
