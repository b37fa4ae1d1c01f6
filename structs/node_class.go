package structs

import (
	"fmt"
	"slices"
	"strings"
)

// Node classes. A node declares (in its client config) an availability
// class and capabilities it is reserved for, and its memory model is
// detected; the scheduler's feasibility check applies NodeTakesGroup.

// Reasons NodeTakesGroup gives for refusing a group; they are counted in
// AllocMetric.ConstraintFiltered, so `job plan` reads
// "2 nodes: reserved 'voice'".
const (
	ReasonOpportunistic = "opportunistic node"
)

// IsUnified reports whether the node's GPUs share host memory.
func (n *Node) IsUnified() bool { return n.MemoryModel == MemoryModelUnified }

// IsOpportunistic reports whether the node is opportunistic.
func (n *Node) IsOpportunistic() bool { return n.Availability == AvailabilityOpportunistic }

// GroupRequires returns the capabilities a group needs: the job's and the
// group's, without duplicates, sorted.
func GroupRequires(job *Job, tg *TaskGroup) []string {
	var out []string
	if job != nil {
		out = append(out, job.Requires...)
	}
	if tg != nil {
		out = append(out, tg.Requires...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// GroupAvailability returns the availability class a group accepts: the
// group's, else the job's, else AvailabilityContinuous.
func GroupAvailability(job *Job, tg *TaskGroup) string {
	if tg != nil && tg.Availability != "" {
		return tg.Availability
	}
	if job != nil && job.Availability != "" {
		return job.Availability
	}
	return AvailabilityContinuous
}

// NodeTakesGroup reports whether node n may run a group that requires the
// capabilities in requires and accepts the availability class avail (see
// GroupRequires and GroupAvailability). The rules:
//
//   - an opportunistic node takes only groups whose availability is
//     "opportunistic"; a continuous node takes every group;
//   - a node that reserves capabilities takes only groups requiring at
//     least one of them;
//   - a group is placed only on nodes that reserve every capability it
//     requires.
//
// reason names the first rule broken: "opportunistic node",
// "reserved 'voice'" or "missing capability 'voice'".
func NodeTakesGroup(n *Node, requires []string, avail string) (ok bool, reason string) {
	if n.IsOpportunistic() && avail != AvailabilityOpportunistic {
		return false, ReasonOpportunistic
	}
	if len(n.Reserved) > 0 {
		shared := false
		for _, r := range requires {
			if slices.Contains(n.Reserved, r) {
				shared = true
				break
			}
		}
		if !shared {
			return false, "reserved '" + strings.Join(n.Reserved, "', '") + "'"
		}
	}
	for _, r := range requires {
		if !slices.Contains(n.Reserved, r) {
			return false, "missing capability '" + r + "'"
		}
	}
	return true, ""
}

// validateClass checks a requires list and an availability class.
func validateClass(requires []string, avail string) []string {
	var p []string
	switch avail {
	case "", AvailabilityContinuous, AvailabilityOpportunistic:
	default:
		p = append(p, fmt.Sprintf("availability: must be %q or %q, got %q", AvailabilityContinuous, AvailabilityOpportunistic, avail))
	}
	for i, r := range requires {
		if !validName.MatchString(r) {
			p = append(p, fmt.Sprintf("requires %d: invalid capability name %q", i+1, r))
		}
	}
	return p
}

// ValidateNodeClass checks a node's declared class: memory model,
// availability and reserved capability names. It returns a
// *ValidationError naming each bad field, or nil.
func ValidateNodeClass(memoryModel, availability string, reserved []string) error {
	var p []string
	switch memoryModel {
	case "", MemoryModelDiscrete, MemoryModelUnified:
	default:
		p = append(p, fmt.Sprintf("memory_model: must be %q or %q, got %q", MemoryModelDiscrete, MemoryModelUnified, memoryModel))
	}
	switch availability {
	case "", AvailabilityContinuous, AvailabilityOpportunistic:
	default:
		p = append(p, fmt.Sprintf("availability: must be %q or %q, got %q", AvailabilityContinuous, AvailabilityOpportunistic, availability))
	}
	for i, r := range reserved {
		if !validName.MatchString(r) {
			p = append(p, fmt.Sprintf("reserved %d: invalid capability name %q", i+1, r))
		}
	}
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Problems: p}
}
