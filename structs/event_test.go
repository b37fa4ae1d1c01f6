package structs

import (
	"errors"
	"strings"
	"testing"
)

func TestEventTopicsMatches(t *testing.T) {
	alloc := &Event{Topic: TopicAllocation, Key: "a1", FilterKeys: []string{"job1", "node1"}}
	cases := []struct {
		topics []string
		want   bool
	}{
		{nil, true},
		{[]string{"*"}, true},
		{[]string{"Allocation"}, true},
		{[]string{"Allocation:a1"}, true},
		{[]string{"Allocation:job1"}, true},
		{[]string{"Allocation:node1"}, true},
		{[]string{"Allocation:other"}, false},
		{[]string{"Job"}, false},
		{[]string{"Job", "*:a1"}, true},
		{[]string{"EndpointAlias"}, false},
	}
	for _, tc := range cases {
		topics, err := ParseEventTopics(tc.topics)
		if err != nil {
			t.Fatalf("%v: %v", tc.topics, err)
		}
		if got := topics.Matches(alloc); got != tc.want {
			t.Errorf("%v matches = %v, want %v", tc.topics, got, tc.want)
		}
	}
}

// FuzzParseEventTopics checks that any ?topic= value either parses into a
// filter or fails with ErrInvalid naming the value, and never panics.
func FuzzParseEventTopics(f *testing.F) {
	for _, s := range []string{"Job", "Job:x", "*", "Allocation:", ":", "Node:a:b", "", "Deployment:*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		topics, err := ParseEventTopics([]string{s})
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "topic") {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		if len(topics) != 1 {
			t.Fatalf("%q: %d topics", s, len(topics))
		}
		_ = topics.Matches(&Event{Topic: TopicJob, Key: s})
	})
}

func TestJobValidateIdlePolicy(t *testing.T) {
	job := &Job{ID: "j", Type: JobTypeBatch, Priority: 50, Meta: map[string]string{IdleStopUtilizationKey: "150", IdleStopAfterKey: "5m"},
		TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{Name: "t", Driver: "native", Resources: &Resources{CPU: 100, MemoryMB: 64}}}}}}
	err := job.Validate()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `group "g": meta "gpulayer.idle_stop.utilization" = "150"`) {
		t.Fatalf("Validate = %v", err)
	}
	job.Meta[IdleStopUtilizationKey] = "5"
	if err := job.Validate(); err != nil {
		t.Fatalf("valid policy refused: %v", err)
	}
}
