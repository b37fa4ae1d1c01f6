package structs

import "fmt"

// EvalTriggerPreemption is the trigger of an evaluation created for a job
// whose allocations were evicted to make room for higher-priority work, so
// they go back to the queue.
const EvalTriggerPreemption = "preemption"

// PreemptPriorityDelta is how much lower a job's priority must be for its
// allocations to be evicted for another job: Nomad's preemption
// (scheduler/preemption.go) likewise leaves alone allocations whose
// priority is within 10 of the job being placed.
const PreemptPriorityDelta = 10

// AppendPreemptedAlloc records that alloc is evicted (DesiredStatus
// "evict") to make room for an allocation of job byJob with priority
// byPriority.
func (p *Plan) AppendPreemptedAlloc(alloc *Allocation, byJob string, byPriority int) {
	a := alloc.Copy()
	a.DesiredStatus = AllocDesiredStatusEvict
	a.DesiredDescription = fmt.Sprintf("preempted by job %q (priority %d)", byJob, byPriority)
	a.PreemptedByJob = byJob
	if p.NodeUpdate == nil {
		p.NodeUpdate = map[string][]*Allocation{}
	}
	p.NodeUpdate[a.NodeID] = append(p.NodeUpdate[a.NodeID], a)
}
