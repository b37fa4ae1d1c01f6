package structs

import (
	"fmt"
	"sort"
	"strings"
)

// JobPlanResponse is what registering a job would do, computed by running
// the scheduler against a snapshot without committing anything
// (Server.JobPlan, PUT /v1/job/{id}/plan).
type JobPlanResponse struct {
	// JobModifyIndex is the running version's, 0 for a job not yet
	// registered.
	JobModifyIndex uint64
	// Diff lists the changes against the running version, one line each:
	// "+ path = value" added, "- path = value" removed, "~ path: old =>
	// new" changed, where path names groups and tasks by name, e.g.
	// `TaskGroups["workers"].Count`. Empty when nothing changed.
	Diff []string
	// Groups tells, per task group in job order, what the scheduler would
	// do.
	Groups []*GroupPlan
	// Preemptions names the allocations of other jobs that would be
	// evicted, as "job.group[index] on node".
	Preemptions []string
}

// GroupPlan is the planned outcome for one task group.
type GroupPlan struct {
	Name string
	// Place, Stop and InPlace count allocations that would be placed,
	// stopped and updated in place.
	Place, Stop, InPlace int
	// Nodes counts the placements per node name.
	Nodes map[string]int
	// Queued counts allocations that would wait for room, and Failure
	// says why (its Explanation in words).
	Queued  int
	Failure *AllocMetric
	// Notes say how the group's update block rolls the change out and
	// what waits for room (server/endpoints_plan.go).
	Notes []string `json:",omitempty"`
}

// JobQueueEntry is one job with work waiting to be placed (GET
// /v1/jobs/queue).
type JobQueueEntry struct {
	JobID      string
	Namespace  string
	Type       string
	Priority   int
	SubmitTime int64 // Unix nanoseconds
	// EvalID is the evaluation the work waits on; Status is its status:
	// "blocked" (no room; it is retried when capacity frees) or "pending"
	// (waiting for a scheduler).
	EvalID string
	Status string
	// Queued counts waiting allocations per task group, and Reasons says
	// why per task group (AllocMetric.Explain).
	Queued  map[string]int
	Reasons map[string]string
}

// SortQueue orders queue entries as queued work is placed: higher priority
// first, then earlier submit time, then job ID.
func SortQueue(q []*JobQueueEntry) {
	sort.SliceStable(q, func(i, j int) bool {
		a, b := q[i], q[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.SubmitTime != b.SubmitTime {
			return a.SubmitTime < b.SubmitTime
		}
		return a.JobID < b.JobID
	})
}

// Explain renders why a group could not be placed, one reason per kind
// with its node count, most nodes first: "5 nodes: not enough free GPU
// memory (nvidia/gpu); 2: reserved 'voice'; 1: opportunistic node". It
// returns "no nodes" when none were evaluated.
func (m *AllocMetric) Explain() string {
	if m == nil {
		return ""
	}
	type reason struct {
		text  string
		count int
	}
	var rs []reason
	for k, n := range m.ConstraintFiltered {
		rs = append(rs, reason{filterText(k), n})
	}
	for k, n := range m.DimensionExhausted {
		rs = append(rs, reason{dimensionText(k), n})
	}
	if len(rs) == 0 {
		if m.NodesEvaluated == 0 {
			return "no nodes"
		}
		return fmt.Sprintf("%d nodes evaluated", m.NodesEvaluated)
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].count != rs[j].count {
			return rs[i].count > rs[j].count
		}
		return rs[i].text < rs[j].text
	})
	parts := make([]string, len(rs))
	for i, r := range rs {
		if i == 0 {
			unit := "nodes"
			if r.count == 1 {
				unit = "node"
			}
			parts[i] = fmt.Sprintf("%d %s: %s", r.count, unit, r.text)
			continue
		}
		parts[i] = fmt.Sprintf("%d: %s", r.count, r.text)
	}
	return strings.Join(parts, "; ")
}

// filterText words a ConstraintFiltered reason.
func filterText(k string) string {
	if d, ok := strings.CutPrefix(k, "missing devices: "); ok {
		return "no " + d + " device that matches"
	}
	if strings.HasPrefix(k, "${") {
		return "constraint " + k
	}
	return k
}

// dimensionText words a DimensionExhausted dimension.
func dimensionText(k string) string {
	switch {
	case k == "cpu":
		return "not enough free CPU"
	case k == "memory":
		return "not enough free memory"
	case strings.HasPrefix(k, "device memory: "):
		return "not enough free GPU memory (" + strings.TrimPrefix(k, "device memory: ") + ")"
	case strings.HasPrefix(k, "devices: "):
		return "not enough free devices (" + strings.TrimPrefix(k, "devices: ") + ")"
	}
	return k
}
