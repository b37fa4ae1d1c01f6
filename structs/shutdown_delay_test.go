package structs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateShutdownDelay checks the bad values of a group's and a
// task's shutdown_delay, each named by its field path, and that any job
// type may set one.
func TestValidateShutdownDelay(t *testing.T) {
	cases := []struct {
		name        string
		jobType     string
		group, task time.Duration
		want        []string // substrings of the error; none: valid
	}{
		{"service group", JobTypeService, 30 * time.Second, 0, nil},
		{"batch task", JobTypeBatch, 0, time.Minute, nil},
		{"both at the limit", JobTypeService, ShutdownDelayLimit, ShutdownDelayLimit, nil},
		{"negative group", JobTypeService, -time.Second, 0, []string{`group "g": shutdown_delay: must not be negative, got -1s`}},
		{"negative task", JobTypeBatch, 0, -time.Nanosecond, []string{`group "g": task "t": shutdown_delay: must not be negative, got -1ns`}},
		{"over the limit", JobTypeService, ShutdownDelayLimit + time.Second, 0, []string{`group "g": shutdown_delay: at most 1h0m0s, got 1h0m1s`}},
		{"task over the limit", JobTypeService, 0, 1<<63 - 1, []string{`group "g": task "t": shutdown_delay: at most 1h0m0s`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := deadlineJob(tc.jobType, 0, 0)
			j.TaskGroups[0].ShutdownDelay = tc.group
			j.TaskGroups[0].Tasks[0].ShutdownDelay = tc.task
			err := j.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
