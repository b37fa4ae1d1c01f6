package structs

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestReschedulePolicyDelayFor(t *testing.T) {
	s := time.Second
	cases := []struct {
		name string
		rp   ReschedulePolicy
		k    int
		want time.Duration
	}{
		{"no delay", ReschedulePolicy{}, 3, 0},
		{"constant by default", ReschedulePolicy{Delay: 5 * s}, 4, 5 * s},
		{"constant", ReschedulePolicy{Delay: 5 * s, DelayFunction: RescheduleDelayConstant}, 4, 5 * s},
		{"exponential first", ReschedulePolicy{Delay: 5 * s, DelayFunction: RescheduleDelayExponential}, 1, 5 * s},
		{"exponential third", ReschedulePolicy{Delay: 5 * s, DelayFunction: RescheduleDelayExponential}, 3, 20 * s},
		{"exponential capped", ReschedulePolicy{Delay: 5 * s, DelayFunction: RescheduleDelayExponential, MaxDelay: 12 * s}, 3, 12 * s},
		{"exponential saturates", ReschedulePolicy{Delay: 5 * s, DelayFunction: RescheduleDelayExponential}, 200, time.Duration(math.MaxInt64)},
		{"exponential many capped", ReschedulePolicy{Delay: 5 * s, DelayFunction: RescheduleDelayExponential, MaxDelay: time.Hour}, 1 << 30, time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rp.DelayFor(tc.k); got != tc.want {
				t.Fatalf("DelayFor(%d) = %s, want %s", tc.k, got, tc.want)
			}
		})
	}
}

func TestValidateRescheduleDelay(t *testing.T) {
	cases := []struct {
		name string
		rp   ReschedulePolicy
		want string // "" for valid
	}{
		{"valid exponential", ReschedulePolicy{Delay: time.Second, DelayFunction: "exponential", MaxDelay: time.Minute}, ""},
		{"negative delay", ReschedulePolicy{Delay: -time.Second}, "reschedule: delay: must not be negative"},
		{"unknown function", ReschedulePolicy{Delay: time.Second, DelayFunction: "fibonacci"}, `reschedule: delay_function: must be "constant" or "exponential", got "fibonacci"`},
		{"negative max", ReschedulePolicy{MaxDelay: -1}, "reschedule: max_delay: must not be negative"},
		{"max below delay", ReschedulePolicy{Delay: time.Minute, MaxDelay: time.Second}, "reschedule: max_delay: must not be below delay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(validateReschedule(&tc.rp), "; ")
			if got != tc.want {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCanonicalizeReschedulePolicy checks that Canonicalize gives a group
// without a reschedule block Nomad's default for the job type, keeps a
// block the job has, and leaves gang groups without one.
func TestCanonicalizeReschedulePolicy(t *testing.T) {
	own := &ReschedulePolicy{Attempts: 2, Interval: time.Hour}
	withDelay := &ReschedulePolicy{Unlimited: true, Delay: 10 * time.Second, DelayFunction: RescheduleDelayConstant}
	cases := []struct {
		name string
		typ  string
		gang bool
		rp   *ReschedulePolicy
		want *ReschedulePolicy
	}{
		{"service default", JobTypeService, false, nil, &ReschedulePolicy{Unlimited: true, Delay: 30 * time.Second, DelayFunction: RescheduleDelayExponential, MaxDelay: time.Hour}},
		{"batch default", JobTypeBatch, false, nil, &ReschedulePolicy{Attempts: 1, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: RescheduleDelayConstant}},
		{"type left empty is service", "", false, nil, DefaultReschedulePolicy(JobTypeService)},
		{"own block without a delay takes the default delay", JobTypeService, false, own,
			&ReschedulePolicy{Attempts: 2, Interval: time.Hour, Delay: 30 * time.Second, DelayFunction: RescheduleDelayExponential, MaxDelay: time.Hour}},
		{"unlimited block without a delay, batch", JobTypeBatch, false, &ReschedulePolicy{Unlimited: true},
			&ReschedulePolicy{Unlimited: true, Delay: 5 * time.Second, DelayFunction: RescheduleDelayConstant}},
		{"own delay kept as written", JobTypeService, false, withDelay, withDelay},
		{"gang group left without", JobTypeBatch, true, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: tc.typ, TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Gang: tc.gang, ReschedulePolicy: tc.rp,
				Tasks: []*Task{{Name: "t", Driver: "native"}}}}}
			j.Canonicalize()
			got := j.TaskGroups[0].ReschedulePolicy
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("policy %+v, want %+v", got, tc.want)
			}
			if err := j.Validate(); err != nil {
				t.Fatalf("canonical job invalid: %v", err)
			}
		})
	}
}
