package structs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestChildrenValidation: each bad periodic, parameterized,
// max_running_children or dispatch_payload field is one problem naming
// the field as the jobspec does.
func TestChildrenValidation(t *testing.T) {
	cases := []struct {
		name string
		mod  func(j *Job)
		want string
	}{
		{"bad cron", func(j *Job) { j.Periodic = &PeriodicConfig{Specs: []string{"61 * * * *"}} }, "periodic: crons: "},
		{"bad singular cron", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "every minute"} }, "periodic: cron: "},
		{"no cron", func(j *Job) { j.Periodic = &PeriodicConfig{} }, "periodic: crons: at least one"},
		{"both", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "@daily", Specs: []string{"@daily"}} }, "periodic: cron and crons"},
		{"huge cron", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: strings.Repeat("1", 300)} }, "at most 256 bytes"},
		{"too many crons", func(j *Job) { j.Periodic = &PeriodicConfig{Specs: make([]string, 33)} }, "periodic: crons: at most 32"},
		{"spec type", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "@daily", SpecType: "rrule"} }, "periodic: spec_type"},
		{"time zone", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "@daily", TimeZone: "Nowhere/Else"} }, "periodic: time_zone"},
		// The host's own zone differs between servers: a failover would
		// move the schedule.
		{"time zone Local", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "@daily", TimeZone: "Local"} }, `periodic: time_zone: "Local" is each server's own zone`},
		{"time zone path", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "@daily", TimeZone: "../../etc/passwd"} }, "periodic: time_zone: unknown"},
		{"service", func(j *Job) { j.Type = JobTypeService; j.Periodic = &PeriodicConfig{Spec: "@daily"} }, "type: a periodic job must be"},
		{"both kinds", func(j *Job) {
			j.Periodic = &PeriodicConfig{Spec: "@daily"}
			j.ParameterizedJob = &ParameterizedJobConfig{}
		}, "both periodic and parameterized"},
		{"payload mode", func(j *Job) { j.ParameterizedJob = &ParameterizedJobConfig{Payload: "maybe"} }, "parameterized: payload: must be"},
		{"meta key", func(j *Job) { j.ParameterizedJob = &ParameterizedJobConfig{MetaRequired: []string{"a b"}} }, "parameterized: meta_required: key"},
		{"meta twice", func(j *Job) {
			j.ParameterizedJob = &ParameterizedJobConfig{MetaRequired: []string{"a"}, MetaOptional: []string{"a"}}
		}, "listed twice"},
		{"negative limit", func(j *Job) { j.ParameterizedJob = &ParameterizedJobConfig{}; j.MaxRunningChildren = -1 }, "max_running_children: must be between"},
		{"limit on a plain job", func(j *Job) { j.MaxRunningChildren = 2 }, "max_running_children: only a periodic or parameterized"},
		{"payload file escapes", func(j *Job) {
			j.TaskGroups[0].Tasks[0].DispatchPayload = &DispatchPayloadConfig{File: "../../etc/passwd"}
		}, `group "g": task "t": dispatch_payload: file: "../../etc/passwd" must be a clean relative path`},
		{"payload file absolute", func(j *Job) { j.TaskGroups[0].Tasks[0].DispatchPayload = &DispatchPayloadConfig{File: "/x"} }, "dispatch_payload: file"},
		{"child ID of another parent", func(j *Job) { j.ParentID = "p"; j.ID = "q/periodic-1" }, "ID: must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := boundsJob()
			tc.mod(j)
			j.Canonicalize()
			err := j.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want a problem containing %q", err, tc.want)
			}
		})
	}
	ok := boundsJob()
	ok.Periodic = &PeriodicConfig{Enabled: true, Specs: []string{"*/15 9-17 * * 1-5", "@daily"}, TimeZone: "America/New_York", ProhibitOverlap: true}
	ok.MaxRunningChildren = 3
	ok.TaskGroups[0].Tasks[0].DispatchPayload = &DispatchPayloadConfig{File: "in/data.json"}
	ok.Canonicalize()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid periodic job: %v", err)
	}
	child := ok.NewChild(PeriodicChildID(ok.ID, 1_700_000_000))
	if err := child.Validate(); err != nil || child.IsParent() || child.PlacesNothing() {
		t.Fatalf("child: %v parent=%v", err, child.IsParent())
	}
	d := ok.Copy()
	d.Periodic, d.ParameterizedJob = nil, &ParameterizedJobConfig{Payload: DispatchPayloadOptional}
	dc := d.NewChild(DispatchChildID(d.ID, 1_700_000_000, GenerateUUID()))
	dc.Dispatched = true
	if err := dc.Validate(); err != nil || dc.IsParameterized() {
		t.Fatalf("dispatched child %q: %v", dc.ID, err)
	}
}

// TestPeriodicNextInTimeZone: the next time is the earliest of the crons,
// read in the job's time zone.
func TestPeriodicNextInTimeZone(t *testing.T) {
	p := &PeriodicConfig{Specs: []string{"0 3 * * *", "30 2 * * *"}, TimeZone: "Asia/Tokyo"}
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // 09:00 in Tokyo
	n, err := p.Next(after)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 1, 17, 30, 0, 0, time.UTC); !n.Equal(want) {
		t.Fatalf("next %v, want %v", n.UTC(), want)
	}
}

// TestDispatchProblems: payload modes, required and unknown meta, sizes.
func TestDispatchProblems(t *testing.T) {
	j := boundsJob()
	j.ParameterizedJob = &ParameterizedJobConfig{Payload: DispatchPayloadRequired, MetaRequired: []string{"a"}, MetaOptional: []string{"b"}}
	cases := []struct {
		payload []byte
		meta    map[string]string
		want    string
	}{
		{nil, map[string]string{"a": "1"}, "requires a payload"},
		{[]byte("x"), nil, `missing required key "a"`},
		{[]byte("x"), map[string]string{"a": "1", "c": "2"}, `key "c" is neither`},
		{make([]byte, MaxDispatchPayload+1), map[string]string{"a": "1"}, "at most 16384 bytes"},
	}
	for _, tc := range cases {
		if err := j.DispatchProblems(tc.payload, tc.meta, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DispatchProblems(%d bytes, %v) = %v, want %q", len(tc.payload), tc.meta, err, tc.want)
		}
	}
	if err := j.DispatchProblems([]byte("x"), map[string]string{"a": "1", "b": "2"}, "tok"); err != nil {
		t.Fatal(err)
	}
	j.ParameterizedJob.Payload = DispatchPayloadForbidden
	if err := j.DispatchProblems([]byte("x"), map[string]string{"a": "1"}, ""); err == nil || !strings.Contains(err.Error(), "forbids") {
		t.Fatalf("forbidden payload: %v", err)
	}
	if err := boundsJob().DispatchProblems(nil, nil, ""); err == nil || !strings.Contains(err.Error(), "not a parameterized job") {
		t.Fatalf("plain job: %v", err)
	}
}

// FuzzParseCron: no cron text panics the parser or the launcher's Next, and
// one the parser accepts gives a time after its start or none.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "0 3 * * 1-5", "@hourly", "*/5 * * * * * 2030", "61 * * * *", "L W # ?", "0 0 30 2 *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if _, err := parseCron(spec); err != nil {
			return
		}
		start := time.Unix(1_700_000_000, 0)
		n, err := (&PeriodicConfig{Spec: spec}).Next(start)
		if err == nil && !n.IsZero() && !n.After(start) {
			t.Fatalf("Next(%v) = %v for %q", start, n, spec)
		}
	})
}

// TestDispatchProblemsTooManyMetaKeys: a dispatch with far more meta keys
// than allowed is refused for the count alone, not with one problem per
// key (10,000 keys made 10,000 problems).
func TestDispatchProblemsTooManyMetaKeys(t *testing.T) {
	j := boundsJob()
	j.ParameterizedJob = &ParameterizedJobConfig{Payload: DispatchPayloadOptional, MetaOptional: []string{"a"}}
	meta := map[string]string{}
	for i := range 10_000 {
		meta[fmt.Sprint("k", i)] = "v"
	}
	err := j.DispatchProblems(nil, meta, "")
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "at most 64 keys, got 10000") {
		t.Fatalf("DispatchProblems(10000 keys) = %v", err)
	}
	if len(ve.Problems) > 2 {
		t.Fatalf("%d problems for too many keys, want the count alone: %v", len(ve.Problems), ve.Problems[:3])
	}
}
