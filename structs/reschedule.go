package structs

import (
	"fmt"
	"math"
	"time"
)

// ReschedulePolicy says when the servers replace a failed allocation (a
// new placement, possibly on another node), as Nomad's reschedule block:
// at most Attempts replacements of the same allocation index within
// Interval, or without limit when Unlimited. A group without one keeps the
// default: a failed service allocation is always replaced, a failed batch
// allocation never.
//
// Delay is the wait between an allocation's failure (its ModifyTime, set
// when the client reported it failed) and its replacement. Its default is
// 0, a replacement at once, as before delay existed; Nomad's defaults (5s
// batch, 30s service) are not applied so that jobs written for earlier
// versions behave the same.
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
