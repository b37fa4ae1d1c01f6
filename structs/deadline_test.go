package structs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func deadlineJob(jobType string, group, task time.Duration) *Job {
	j := &Job{ID: "dl", Type: jobType, TaskGroups: []*TaskGroup{{
		Name: "g", Count: 1, MaxRunDuration: group,
		Tasks: []*Task{{Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"}, MaxRunDuration: task}},
	}}}
	j.Canonicalize()
	return j
}

// TestValidateMaxRunDuration checks the bad values of a group's and a
// task's max_run_duration, each named by its field path, and that a batch
// job may set them.
func TestValidateMaxRunDuration(t *testing.T) {
	cases := []struct {
		name        string
		jobType     string
		group, task time.Duration
		want        []string // substrings of the error; none: valid
	}{
		{"batch group", JobTypeBatch, 3 * time.Second, 0, nil},
		{"batch task", JobTypeBatch, 0, time.Hour, nil},
		{"batch both", JobTypeBatch, time.Hour, time.Minute, nil},
		{"at the limit", JobTypeBatch, MaxRunDurationLimit, 0, nil},
		{"negative group", JobTypeBatch, -3 * time.Second, 0, []string{`group "g": max_run_duration: must be more than zero, got -3s`}},
		{"negative task", JobTypeBatch, 0, -time.Nanosecond, []string{`group "g": task "t": max_run_duration: must be more than zero, got -1ns`}},
		{"over the limit", JobTypeBatch, MaxRunDurationLimit + time.Second, 0, []string{`group "g": max_run_duration: at most 8760h0m0s (365 days), got 8760h0m1s`}},
		{"service group", JobTypeService, time.Minute, 0, []string{`group "g": max_run_duration: only batch jobs may set it`, `this job's type is "service"`}},
		{"service task", JobTypeService, 0, time.Minute, []string{`group "g": task "t": max_run_duration: only batch jobs may set it`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := deadlineJob(tc.jobType, tc.group, tc.task).Validate()
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

func TestTaskMaxRunDuration(t *testing.T) {
	cases := []struct {
		group, task, want time.Duration
	}{
		{0, 0, 0},
		{time.Minute, 0, time.Minute},
		{0, time.Second, time.Second},
		{time.Minute, time.Second, time.Second},
		{time.Second, time.Minute, time.Second},
		{-time.Second, 0, 0},
	}
	for _, tc := range cases {
		tg := &TaskGroup{MaxRunDuration: tc.group}
		if got := tg.TaskMaxRunDuration(&Task{MaxRunDuration: tc.task}); got != tc.want {
			t.Errorf("group %s task %s: %s, want %s", tc.group, tc.task, got, tc.want)
		}
	}
}
