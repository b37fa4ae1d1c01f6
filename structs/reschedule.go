package structs

import (
	"fmt"
	"math"
	"time"
)

// ReschedulePolicy says when the servers replace a failed allocation (a
// new placement, possibly on another node), as Nomad's reschedule block:
// at most Attempts replacements of the same allocation index within
// Interval, or without limit when Unlimited. A group without one gets
// DefaultReschedulePolicy from Job.Canonicalize (gang groups excepted: a
// gang restarts whole, see GangMaxRestarts). A nil policy, which only a
// gang group or a job stored by an older build has, keeps the earlier
// rule: a failed service allocation is replaced at once, a failed batch
// allocation never.
//
// Delay is the wait between an allocation's failure (its ModifyTime, set
// when the client reported it failed) and its replacement; 0 replaces at
// once. A reschedule block that leaves delay out gets 0: the defaults
// apply to a missing block, not to its missing fields.
//
// DelayFunction is "constant" (the default, also when empty): every
// replacement waits Delay; or "exponential": the k-th failure of an
// allocation index counted within Interval (all of them when Interval is
// 0), the same failures Attempts counts, waits Delay * 2^(k-1), at most
// MaxDelay when MaxDelay is above 0. This follows Nomad's reschedule block
// (delay_function, max_delay); Nomad's "fibonacci" is not supported.
type ReschedulePolicy struct {
	Attempts      int
	Interval      time.Duration
	Unlimited     bool
	Delay         time.Duration
	DelayFunction string
	MaxDelay      time.Duration
}

// DefaultReschedulePolicy returns the policy a group without a reschedule
// block gets, Nomad's defaults (nomad/structs/structs.go
// DefaultServiceJobReschedulePolicy and DefaultBatchJobReschedulePolicy):
// for a batch job one replacement per allocation index within 24 hours,
// 5 seconds after the failure; for a service job replacements without
// limit, 30 seconds after the first failure, doubling with each failure up
// to 1 hour. Without them a service task that failed at start was replaced
// in a tight loop, about five times a second.
func DefaultReschedulePolicy(jobType string) *ReschedulePolicy {
	if jobType == JobTypeBatch {
		return &ReschedulePolicy{Attempts: 1, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: RescheduleDelayConstant}
	}
	return &ReschedulePolicy{Unlimited: true, Delay: 30 * time.Second, DelayFunction: RescheduleDelayExponential, MaxDelay: time.Hour}
}

// Reschedule delay functions.
const (
	RescheduleDelayConstant    = "constant"
	RescheduleDelayExponential = "exponential"
)

// DelayFor returns the wait before replacing an allocation index's k-th
// failure (k counts from 1): Delay for "constant", Delay * 2^(k-1) capped at
// MaxDelay (when above 0) for "exponential", saturating instead of
// overflowing.
func (rp *ReschedulePolicy) DelayFor(k int) time.Duration {
	d := rp.Delay
	if d <= 0 || rp.DelayFunction != RescheduleDelayExponential {
		return d
	}
	for i := 1; i < k; i++ {
		if rp.MaxDelay > 0 && d >= rp.MaxDelay {
			break
		}
		if d > time.Duration(math.MaxInt64/2) {
			d = time.Duration(math.MaxInt64)
			break
		}
		d *= 2
	}
	if rp.MaxDelay > 0 && d > rp.MaxDelay {
		d = rp.MaxDelay
	}
	return d
}

// validateReschedule returns the problems of a group's reschedule policy.
func validateReschedule(rp *ReschedulePolicy) []string {
	if rp == nil {
		return nil
	}
	var p []string
	if rp.Attempts < 0 {
		p = append(p, "reschedule: attempts: must be 0 or more")
	}
	if rp.Interval < 0 {
		p = append(p, "reschedule: interval: must not be negative")
	}
	if rp.Delay < 0 {
		p = append(p, "reschedule: delay: must not be negative")
	}
	switch rp.DelayFunction {
	case "", RescheduleDelayConstant, RescheduleDelayExponential:
	default:
		p = append(p, fmt.Sprintf("reschedule: delay_function: must be %q or %q, got %q", RescheduleDelayConstant, RescheduleDelayExponential, rp.DelayFunction))
	}
	if rp.MaxDelay < 0 {
		p = append(p, "reschedule: max_delay: must not be negative")
	} else if rp.MaxDelay > 0 && rp.MaxDelay < rp.Delay {
		p = append(p, "reschedule: max_delay: must not be below delay")
	}
	return p
}
