package structs

import "time"

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
// versions behave the same. Nomad's delay_function and max_delay are not
// supported: the delay is constant.
type ReschedulePolicy struct {
	Attempts  int
	Interval  time.Duration
	Unlimited bool
	Delay     time.Duration
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
	return p
}
