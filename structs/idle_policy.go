package structs

import (
	"fmt"
	"strconv"
	"time"
)

// Meta keys of the GPU idle policy: a client stops an allocation whose GPUs
// all stay below IdleStopUtilizationKey percent utilisation for
// IdleStopAfterKey. Set both in the job's or the group's meta (the group's
// win); with neither set there is no policy.
//
//	meta {
//	  "gpulayer.idle_stop.utilization" = "5"    # percent, 0 < x <= 100
//	  "gpulayer.idle_stop.after"       = "30m"  # Go duration, >= 1s
//	}
const (
	IdleStopUtilizationKey = "gpulayer.idle_stop.utilization"
	IdleStopAfterKey       = "gpulayer.idle_stop.after"
	// SimulateGPUUtilizationKey, in a job's or group's meta, sets the
	// utilisation (percent) that simulated GPUs held by its allocations
	// report, for trying the idle policy without a GPU.
	SimulateGPUUtilizationKey = "gpulayer.simulate.gpu_utilization"
)

// IdlePolicy stops an allocation whose GPUs stay idle.
type IdlePolicy struct {
	// BelowPercent is the utilisation threshold, in percent.
	BelowPercent float64
	// After is how long every GPU of the allocation must stay below it.
	After time.Duration
}

// mergedMeta returns the job's meta overlaid with the group's.
func mergedMeta(job *Job, group string) map[string]string {
	out := map[string]string{}
	if job == nil {
		return out
	}
	for k, v := range job.Meta {
		out[k] = v
	}
	if tg := job.LookupTaskGroup(group); tg != nil {
		for k, v := range tg.Meta {
			out[k] = v
		}
	}
	return out
}

// IdlePolicyFor returns the idle policy of the job's group, or nil when
// there is none. It returns an error wrapping ErrInvalid that names the
// meta key for a bad value, or when only one of the two keys is set.
func IdlePolicyFor(job *Job, group string) (*IdlePolicy, error) {
	meta := mergedMeta(job, group)
	u, hasU := meta[IdleStopUtilizationKey]
	a, hasA := meta[IdleStopAfterKey]
	if !hasU && !hasA {
		return nil, nil
	}
	if hasU != hasA {
		return nil, fmt.Errorf("%w: meta %q and %q must be set together", ErrInvalid, IdleStopUtilizationKey, IdleStopAfterKey)
	}
	pct, err := strconv.ParseFloat(u, 64)
	if err != nil || pct <= 0 || pct > 100 {
		return nil, fmt.Errorf("%w: meta %q = %q: want a percentage above 0 and at most 100", ErrInvalid, IdleStopUtilizationKey, u)
	}
	d, err := time.ParseDuration(a)
	if err != nil || d < time.Second {
		return nil, fmt.Errorf("%w: meta %q = %q: want a duration of at least 1s, such as \"30m\"", ErrInvalid, IdleStopAfterKey, a)
	}
	return &IdlePolicy{BelowPercent: pct, After: d}, nil
}

// SimulatedUtilizationFor returns the utilisation the job's group asks
// simulated GPUs to report, or -1 when it sets none or an unusable value.
func SimulatedUtilizationFor(job *Job, group string) float64 {
	v, ok := mergedMeta(job, group)[SimulateGPUUtilizationKey]
	if !ok {
		return -1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return -1
	}
	return f
}
