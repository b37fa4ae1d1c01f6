package structs

import (
	"errors"
	"strings"
	"testing"
)

// TestJobCountLimits checks that Validate and ValidateCounts refuse a group
// count above MaxGroupCount and a total above MaxJobCount, naming the group
// and the field, and accept the limits themselves.
func TestJobCountLimits(t *testing.T) {
	mk := func(counts ...int) *Job {
		j := &Job{ID: "j", Type: JobTypeBatch}
		for i, c := range counts {
			j.TaskGroups = append(j.TaskGroups, &TaskGroup{Name: string(rune('a' + i)), Count: c,
				Tasks: []*Task{{Name: "t", Driver: "native"}}})
		}
		j.Canonicalize()
		return j
	}
	cases := []struct {
		name   string
		counts []int
		want   []string // nil: valid
	}{
		{"one group at the limit", []int{MaxGroupCount}, nil},
		{"zero", []int{0}, nil},
		{"1e9 in one group", []int{1_000_000_000}, []string{`group "a": count: must be at most 100000, got 1000000000`}},
		{"negative", []int{-1}, []string{`group "a": count: must be 0 or more, got -1`}},
		{"total at the limit", []int{MaxJobCount / 2, MaxJobCount / 2}, nil},
		{"total above the limit", []int{MaxJobCount / 2, MaxJobCount/2 + 1}, []string{"count: the groups ask for 100001 allocations in all, at most 100000"}},
		{"oversized group left out of the total", []int{int(^uint(0) >> 1), MaxGroupCount}, []string{`group "a": count: must be at most 100000`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := mk(tc.counts...)
			for name, err := range map[string]error{"Validate": j.Validate(), "ValidateCounts": j.ValidateCounts()} {
				if tc.want == nil {
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					continue
				}
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%s: err = %v, want ErrInvalid", name, err)
				}
				var ve *ValidationError
				if !errors.As(err, &ve) || len(ve.Problems) != len(tc.want) {
					t.Fatalf("%s: problems %q, want %d", name, err, len(tc.want))
				}
				for i, w := range tc.want {
					if !strings.HasPrefix(ve.Problems[i], w) {
						t.Errorf("%s: problem %d = %q, want prefix %q", name, i, ve.Problems[i], w)
					}
				}
			}
		})
	}
}
