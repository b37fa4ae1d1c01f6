package structs

import "testing"

func TestAllocMetricExplain(t *testing.T) {
	cases := []struct {
		name string
		m    *AllocMetric
		want string
	}{
		{"nil", nil, ""},
		{"nothing evaluated", &AllocMetric{}, "no nodes"},
		{"mixed", &AllocMetric{
			NodesEvaluated:     8,
			ConstraintFiltered: map[string]int{"reserved 'voice'": 2, ReasonOpportunistic: 1},
			DimensionExhausted: map[string]int{"device memory: nvidia/gpu": 5},
		}, "5 nodes: not enough free GPU memory (nvidia/gpu); 2: reserved 'voice'; 1: opportunistic node"},
		{"one node", &AllocMetric{NodesEvaluated: 1, DimensionExhausted: map[string]int{"cpu": 1}}, "1 node: not enough free CPU"},
		{"ties by text", &AllocMetric{NodesEvaluated: 2,
			ConstraintFiltered: map[string]int{"missing devices: nvidia/gpu": 1, "${attr.kernel.name} = linux": 1}},
			"1 node: constraint ${attr.kernel.name} = linux; 1: no nvidia/gpu device that matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.Explain(); got != tc.want {
				t.Fatalf("Explain() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSortQueue(t *testing.T) {
	q := []*JobQueueEntry{
		{JobID: "c", Priority: 50, SubmitTime: 30},
		{JobID: "a", Priority: 50, SubmitTime: 10},
		{JobID: "z", Priority: 90, SubmitTime: 99},
		{JobID: "b", Priority: 50, SubmitTime: 10},
		{JobID: "low", Priority: 10, SubmitTime: 1},
	}
	SortQueue(q)
	want := []string{"z", "a", "b", "c", "low"}
	for i, e := range q {
		if e.JobID != want[i] {
			t.Fatalf("position %d: %s, want %s", i, e.JobID, want[i])
		}
	}
}
