package structs

import (
	"strings"
	"testing"
)

func TestNodeTakesGroup(t *testing.T) {
	cases := []struct {
		name       string
		avail      string
		reserved   []string
		requires   []string
		groupAvail string
		ok         bool
		reason     string
	}{
		{"plain node, plain group", "", nil, nil, AvailabilityContinuous, true, ""},
		{"opportunistic refuses default", AvailabilityOpportunistic, nil, nil, AvailabilityContinuous, false, ReasonOpportunistic},
		{"opportunistic takes opt-in", AvailabilityOpportunistic, nil, nil, AvailabilityOpportunistic, true, ""},
		{"continuous takes opt-in", AvailabilityContinuous, nil, nil, AvailabilityOpportunistic, true, ""},
		{"reserved refuses others", "", []string{"voice"}, nil, AvailabilityContinuous, false, "reserved 'voice'"},
		{"reserved takes its capability", "", []string{"voice", "tts"}, []string{"tts"}, AvailabilityContinuous, true, ""},
		{"requirement needs a reserving node", "", nil, []string{"voice"}, AvailabilityContinuous, false, "missing capability 'voice'"},
		{"every requirement must be reserved", "", []string{"voice"}, []string{"voice", "asr"}, AvailabilityContinuous, false, "missing capability 'asr'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{Availability: tc.avail, Reserved: tc.reserved}
			ok, reason := NodeTakesGroup(n, tc.requires, tc.groupAvail)
			if ok != tc.ok || reason != tc.reason {
				t.Fatalf("NodeTakesGroup = %v %q, want %v %q", ok, reason, tc.ok, tc.reason)
			}
		})
	}
}

func TestGroupClassDefaults(t *testing.T) {
	job := &Job{Requires: []string{"voice", "asr"}, Availability: AvailabilityOpportunistic}
	tg := &TaskGroup{Requires: []string{"voice"}}
	if got := GroupRequires(job, tg); strings.Join(got, ",") != "asr,voice" {
		t.Fatalf("GroupRequires = %v", got)
	}
	if got := GroupAvailability(job, tg); got != AvailabilityOpportunistic {
		t.Fatalf("GroupAvailability = %q", got)
	}
	tg.Availability = AvailabilityContinuous
	if got := GroupAvailability(job, tg); got != AvailabilityContinuous {
		t.Fatalf("group override: %q", got)
	}
	if got := GroupAvailability(nil, nil); got != AvailabilityContinuous {
		t.Fatalf("default: %q", got)
	}
}

func TestValidateGPUFields(t *testing.T) {
	valid := func() *Job {
		j := &Job{ID: "j", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{Name: "g", Count: 2, Tasks: []*Task{{
			Name: "t", Driver: "native", Resources: &Resources{CPU: 100, MemoryMB: 64, Devices: []*RequestedDevice{{Name: "nvidia/gpu", Count: 1}}},
		}}}}}
		j.Canonicalize()
		return j
	}
	cases := []struct {
		name string
		mod  func(j *Job)
		want string
	}{
		{"valid", func(*Job) {}, ""},
		{"share with count 2", func(j *Job) {
			d := j.TaskGroups[0].Tasks[0].Resources.Devices[0]
			d.MemoryMB, d.Count = 1024, 2
		}, `device "nvidia/gpu": memory: a memory share is of one device; count must be 1, got 2`},
		{"negative share", func(j *Job) { j.TaskGroups[0].Tasks[0].Resources.Devices[0].MemoryMB = -1 }, "memory: must be 0 or more MiB, got -1"},
		{"bad availability", func(j *Job) { j.TaskGroups[0].Availability = "sometimes" }, `availability: must be "continuous" or "opportunistic", got "sometimes"`},
		{"bad job availability", func(j *Job) { j.Availability = "never" }, `availability: must be "continuous" or "opportunistic", got "never"`},
		{"bad capability", func(j *Job) { j.Requires = []string{"has space"} }, `requires 1: invalid capability name "has space"`},
		{"empty gang", func(j *Job) {
			j.TaskGroups[0].Gang = true
			j.TaskGroups[0].Count = 0
		}, "gang: a gang group needs count of at least 1, got 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := valid()
			tc.mod(j)
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	if err := ValidateNodeClass("hybrid", "sometimes", []string{"ok", "not ok"}); err == nil ||
		!strings.Contains(err.Error(), "memory_model") || !strings.Contains(err.Error(), "availability") || !strings.Contains(err.Error(), `reserved 2`) {
		t.Fatalf("ValidateNodeClass = %v", err)
	}
	if err := ValidateNodeClass(MemoryModelUnified, AvailabilityOpportunistic, []string{"voice"}); err != nil {
		t.Fatal(err)
	}
	// A gang group defaults to no in-place restarts: the gang restarts whole.
	j := valid()
	j.TaskGroups[0].Gang = true
	j.TaskGroups[0].RestartPolicy = nil
	j.Canonicalize()
	if j.TaskGroups[0].RestartPolicy.Attempts != 0 {
		t.Fatalf("gang restart attempts %d, want 0", j.TaskGroups[0].RestartPolicy.Attempts)
	}
}
