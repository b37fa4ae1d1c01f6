package client

import (
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// restartTracker applies a group's restart policy to one task, after
// Nomad's client/allocrunner/taskrunner/restarts: at most Attempts
// restarts within a window of Interval, each after Delay. When attempts
// run out, mode "fail" stops restarting and mode "delay" waits until the
// window ends and starts a new one. An Interval of zero makes the window
// endless.
type restartTracker struct {
	policy      structs.RestartPolicy
	count       int
	windowStart time.Time
	now         func() time.Time
}

func newRestartTracker(p *structs.RestartPolicy, jobType string) *restartTracker {
	if p == nil {
		p = structs.DefaultRestartPolicy(jobType)
	}
	return &restartTracker{policy: *p, now: time.Now}
}

// next decides on a restart after the task exited. It returns whether to
// restart, the wait before it, and a reason for the task event.
func (r *restartTracker) next() (restart bool, delay time.Duration, reason string) {
	now := r.now()
	if r.windowStart.IsZero() || (r.policy.Interval > 0 && now.Sub(r.windowStart) > r.policy.Interval) {
		r.windowStart, r.count = now, 0
	}
	if r.count < r.policy.Attempts {
		r.count++
		return true, r.policy.Delay, "Restart within policy"
	}
	if r.policy.Mode == structs.RestartModeDelay && r.policy.Interval > 0 {
		d := r.windowStart.Add(r.policy.Interval).Sub(now)
		if d < r.policy.Delay {
			d = r.policy.Delay
		}
		r.windowStart, r.count = now.Add(d), 0
		return true, d, fmt.Sprintf("Exceeded allowed attempts %d in interval %s and mode is %q", r.policy.Attempts, r.policy.Interval, structs.RestartModeDelay)
	}
	return false, 0, fmt.Sprintf("Exceeded allowed attempts %d in interval %s and mode is %q", r.policy.Attempts, r.policy.Interval, structs.RestartModeFail)
}
