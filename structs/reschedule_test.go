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
