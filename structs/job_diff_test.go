package structs

import (
	"slices"
	"testing"
)

func TestJobDiff(t *testing.T) {
	base := func() *Job {
		j := &Job{ID: "j", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{Name: "t", Driver: "native"}}}}}
		j.Canonicalize()
		return j
	}
	cases := []struct {
		name string
		mod  func(j *Job)
		want []string
	}{
		{"same", func(*Job) {}, nil},
		{"server fields ignored", func(j *Job) { j.Version, j.JobModifyIndex, j.Status = 3, 99, "running" }, nil},
		{"count", func(j *Job) { j.TaskGroups[0].Count = 4 }, []string{`~ TaskGroups["g"].Count: 1 => 4`}},
		{"gang and requires", func(j *Job) {
			j.TaskGroups[0].Gang = true
			j.TaskGroups[0].Requires = []string{"voice"}
		}, []string{`+ TaskGroups["g"].Requires[0] = "voice"`, `~ TaskGroups["g"].Gang: false => true`}},
		{"task removed", func(j *Job) { j.TaskGroups[0].Tasks = nil }, []string{`- TaskGroups["g"].Tasks["t"].Driver = "native"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := base()
			tc.mod(cur)
			got := JobDiff(base(), cur)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Fatalf("diff %q lacks %q", got, w)
				}
			}
			if len(tc.want) == 0 && len(got) != 0 {
				t.Fatalf("diff %q, want none", got)
			}
		})
	}
	if d := JobDiff(nil, base()); len(d) == 0 || d[0][0] != '+' {
		t.Fatalf("new job diff %q", d)
	}
}
