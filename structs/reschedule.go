package structs

import "time"

// ReschedulePolicy says when the servers replace a failed allocation (a
// new placement, possibly on another node), as Nomad's reschedule block:
// at most Attempts replacements of the same allocation index within
// Interval, or without limit when Unlimited. A group without one keeps the
// default: a failed service allocation is always replaced, a failed batch
// allocation never. Nomad's delay and delay_function are not supported:
// a replacement is placed at once.
type ReschedulePolicy struct {
	Attempts  int
	Interval  time.Duration
	Unlimited bool
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
	return p
}
