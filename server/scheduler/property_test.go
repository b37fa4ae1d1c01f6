package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// randomFleet returns 2 to 7 nodes of mixed kinds: discrete GPU nodes of
// several models (some with an unhealthy GPU), MIG nodes, unified-memory
// nodes and CPU-only nodes; about one in five reserves "voice" and one in
// five is opportunistic.
func randomFleet(rng *rand.Rand, w int) []*structs.Node {
	models := []struct {
		name string
		mem  int64
	}{{h100, 81559}, {a10, 24576}, {"NVIDIA L4", 23034}}
	n := 2 + rng.IntN(6)
	out := make([]*structs.Node, 0, n)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("w%d-n%d", w, i)
		var node *structs.Node
		switch rng.IntN(6) {
		case 0:
			node = migNode(id, 1+rng.IntN(3))
		case 1:
			node = unifiedNode(id, int64(16+rng.IntN(5)*16)*1024)
		case 2:
			node = gpuNode(id, 0, "", 0)
		default:
			m := models[rng.IntN(len(models))]
			node = gpuNode(id, 1+rng.IntN(8), m.name, m.mem)
			if rng.IntN(5) == 0 {
				node.NodeResources.Devices[0].Instances[0].Healthy = false
			}
		}
		node.NodeResources.CPU = int64(4000 + rng.IntN(8)*4000)
		node.NodeResources.MemoryMB = max(node.NodeResources.MemoryMB/int64(1+rng.IntN(4)), 16*1024)
		if rng.IntN(5) == 0 {
			node.Reserved = []string{"voice"}
		}
		if rng.IntN(5) == 0 {
			node.Availability = structs.AvailabilityOpportunistic
		}
		out = append(out, node)
	}
	return out
}

// randomJob returns a job of one group: batch or service, priority 10 to
// 90, count 1 to 4, sometimes a gang, asking for whole GPUs, a memory
// share or none, sometimes requiring "voice" or opting in to
// opportunistic nodes.
func randomJob(rng *rand.Rand, id string) *structs.Job {
	typ := structs.JobTypeBatch
	if rng.IntN(3) == 0 {
		typ = structs.JobTypeService
	}
	j := gpuJob(id, typ, 1+rng.IntN(4), 0, 500+rng.IntN(4000), 1024+rng.IntN(12*1024))
	j.Priority = 10 + 10*rng.IntN(9)
	tg := j.TaskGroups[0]
	res := tg.Tasks[0].Resources
	names := []string{"nvidia/gpu", "gpu", "apple/gpu"}
	switch rng.IntN(4) {
	case 0:
	case 1:
		res.Devices = []*structs.RequestedDevice{{Name: names[rng.IntN(len(names))], MemoryMB: 1024 * (2 + rng.IntN(30)), Count: 1}}
	default:
		res.Devices = []*structs.RequestedDevice{{Name: names[rng.IntN(2)], Count: 1 + rng.IntN(3)}}
	}
	if rng.IntN(4) == 0 {
		tg.Gang = true
		tg.ReschedulePolicy = nil
	} else if typ == structs.JobTypeService {
		// Replace failures at once: a replacement waiting for its delay
		// (reschedule_delay_test.go) would look queued while it fits.
		tg.ReschedulePolicy = &structs.ReschedulePolicy{Unlimited: true}
	}
	if rng.IntN(5) == 0 {
		tg.Requires = []string{"voice"}
	}
	if rng.IntN(4) == 0 {
		tg.Availability = structs.AvailabilityOpportunistic
	}
	// Dynamic host ports: the oracle checks none is given twice on a
	// node (the range is never exhausted here, so placement is unchanged).
	if rng.IntN(3) == 0 {
		tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}, {Label: "metrics"}}}}
	}
	return j
}

// TestPropertyRandomFleets runs 2,000 random workloads, each on its own
// random mixed fleet: jobs are registered one by one, members fail now and
// then, and then the cluster settles (clients stop what the server stopped
// or evicted, and every job is evaluated again, highest priority first,
// until nothing changes). It checks, throughout, that no node and no GPU
// instance is over-committed (memory shares included) and that every task
// holds exactly the devices it asked for (oracle_test.go, written apart
// from the scheduler and from structs.AllocsFit), that no gang is ever
// partly placed (each gang attempt has all or none of its members), that
// reserved nodes hold only work requiring their capability and
// opportunistic nodes only work that opted in (oracleNodeClass, not
// structs.NodeTakesGroup); and, once settled, that no queued allocation has
// room anywhere (an independent greedy check finds no node, or for a gang
// no set of nodes, where it fits).
func TestPropertyRandomFleets(t *testing.T) {
	workloads := 2000
	if testing.Short() || raceEnabled {
		workloads = 300
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	stats := map[string]int{}
	for w := 0; w < workloads; w++ {
		h := newHarness(t)
		for _, n := range randomFleet(rng, w) {
			h.state.upsertNode(n)
		}
		var jobs []*structs.Job
		for i, n := 0, 2+rng.IntN(6); i < n; i++ {
			j := h.state.upsertJob(randomJob(rng, fmt.Sprintf("w%d-j%d", w, i)))
			jobs = append(jobs, j)
			h.process(newEval(j, structs.EvalTriggerJobRegister))
			checkProperties(t, h)
			// A running allocation fails now and then.
			if rng.IntN(4) == 0 {
				live := h.state.liveAllocs(jobs[rng.IntN(len(jobs))].ID)
				if len(live) > 0 {
					h.state.setClientStatus(structs.AllocClientStatusFailed, live[rng.IntN(len(live))])
					stats["failures"]++
				}
			}
		}
		settle(t, h, jobs)
		for _, j := range jobs {
			left := j.TaskGroups[0].Count - len(h.state.liveAllocs(j.ID))
			if left <= 0 {
				stats["fully placed"]++
				continue
			}
			stats["left queued"]++
			if j.TaskGroups[0].Gang && gangAttempts(h, j) > structs.GangMaxRestarts {
				continue
			}
			if j.Type == structs.JobTypeBatch && !j.TaskGroups[0].Gang {
				left = batchLeft(h, j)
			}
			if left > 0 && greedyFits(h, j, left) {
				t.Fatalf("workload %d: job %s has %d allocations queued but they fit (%s)", w, j.ID, left, describe(h, j))
			}
		}
		for _, a := range h.state.allocs {
			if a.DesiredStatus == structs.AllocDesiredStatusEvict {
				stats["evicted"]++
			}
			if a.Gang != nil && a.Gang.Attempt > 0 && a.Gang.Rank == 0 {
				stats["gang restarts"]++
			}
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					if d.MemoryMB > 0 {
						stats["memory shares"]++
					}
				}
			}
		}
	}
	for _, k := range []string{"fully placed", "left queued", "evicted", "gang restarts", "memory shares"} {
		if stats[k] == 0 {
			t.Fatalf("no %q over %d workloads: the generator is too narrow (%v)", k, workloads, stats)
		}
	}
	t.Logf("%d workloads: %v", workloads, stats)
}

// settle plays clients and the blocked-evaluation tracker until nothing
// changes: allocations the server stopped or evicted finish, and every job
// is evaluated again, highest priority first.
func settle(t *testing.T, h *harness, jobs []*structs.Job) {
	t.Helper()
	order := slices.Clone(jobs)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Priority > order[j].Priority })
	for round := 0; ; round++ {
		if round == 20 {
			for _, p := range h.planner.plans[len(h.planner.plans)-3:] {
				for _, l := range p.NodeUpdate {
					for _, a := range l {
						t.Logf("plan %s stop %s %s %s", p.Job.ID, a.Name, a.DesiredStatus, a.DesiredDescription)
					}
				}
				for _, l := range p.NodeAllocation {
					for _, a := range l {
						t.Logf("plan %s place %s on %s", p.Job.ID, a.Name, a.NodeID)
					}
				}
			}
			for _, j := range jobs {
				t.Logf("%s", describe(h, h.state.jobs[j.ID]))
				for _, a := range h.state.byJob[j.ID] {
					t.Logf("  alloc %s node %s desired %s client %s res %+v", a.Name, a.NodeID, a.DesiredStatus, a.ClientStatus, *a.AllocatedResources.Tasks["t"])
				}
			}
			for _, n := range h.state.nodes {
				for _, g := range n.NodeResources.Devices {
					t.Logf("node %s group %s mem %d instances %d", n.ID, g.Name, g.MemoryMiB(), len(g.Instances))
				}
				for _, a := range h.state.byNode[n.ID] {
					if a.HoldsResources() {
						for _, d := range a.AllocatedResources.Tasks["t"].Devices {
							t.Logf("  holds %s %s %v %d", a.Name, a.DesiredStatus, d.DeviceIDs, d.MemoryMB)
						}
					}
				}
			}
			for _, j := range jobs {
				ev := h.process(newEval(h.state.jobs[j.ID], structs.EvalTriggerQueuedAllocs))
				if m := ev.FailedTGAllocs["g"]; m != nil {
					t.Logf("job %s failed %+v", j.ID, *m)
				}
			}
			t.Fatal("cluster did not settle in 20 rounds")
		}
		before := h.state.index
		var stopping []*structs.Allocation
		for _, a := range h.state.allocs {
			if a.DesiredStatus != structs.AllocDesiredStatusRun && !a.ClientTerminalStatus() {
				stopping = append(stopping, a)
			}
		}
		sort.Slice(stopping, func(i, j int) bool { return stopping[i].ID < stopping[j].ID })
		if len(stopping) > 0 {
			h.state.setClientStatus(structs.AllocClientStatusComplete, stopping...)
		}
		changed := len(stopping) > 0
		// Freed capacity unblocks every blocked evaluation, highest
		// priority first; an eviction starts a new round, as the evicted
		// job's evaluation waits until its allocations stopped.
	jobs:
		for _, j := range order {
			plans := len(h.planner.plans)
			h.process(newEval(h.state.jobs[j.ID], structs.EvalTriggerQueuedAllocs))
			checkProperties(t, h)
			for _, p := range h.planner.plans[plans:] {
				changed = true
				for _, l := range p.NodeUpdate {
					for _, a := range l {
						if a.DesiredStatus == structs.AllocDesiredStatusEvict {
							break jobs
						}
					}
				}
			}
		}
		if !changed && h.state.index == before {
			return
		}
	}
}

// checkProperties checks the invariants that must hold after every
// evaluation.
func checkProperties(t *testing.T, h *harness) {
	t.Helper()
	checkInvariants(t, h.state)
	type gangKey struct {
		job     string
		attempt int
	}
	members := map[gangKey]int{}
	for _, a := range h.state.allocs {
		n := h.state.nodes[a.NodeID]
		tg := a.Job.LookupTaskGroup(a.TaskGroup)
		if reason := oracleNodeClass(n, a.Job, tg); reason != "" {
			t.Fatalf("alloc %s on node %s (reserved %v, availability %q): %s", a.Name, n.ID, n.Reserved, n.Availability, reason)
		}
		if tg.Gang {
			if a.Gang == nil {
				t.Fatalf("gang alloc %s without gang info", a.Name)
			}
			members[gangKey{a.JobID, a.Gang.Attempt}]++
		}
	}
	for k, n := range members {
		if want := h.state.jobs[k.job].TaskGroups[0].Count; n != want {
			t.Fatalf("gang %s attempt %d has %d members, want %d: partly placed", k.job, k.attempt, n, want)
		}
	}
}

// gangAttempts returns the highest gang attempt of the job's allocations.
func gangAttempts(h *harness, j *structs.Job) int {
	n := 0
	for _, a := range h.state.byJob[j.ID] {
		if a.Gang != nil && a.Gang.Attempt > n {
			n = a.Gang.Attempt
		}
	}
	return n
}

// batchLeft returns how many indexes of a batch job have neither a live
// allocation nor one that completed (a completed or failed batch
// allocation of the current version is not placed again).
func batchLeft(h *harness, j *structs.Job) int {
	covered := map[int]bool{}
	for _, a := range h.state.byJob[j.ID] {
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			continue
		}
		if !a.ClientTerminalStatus() || a.ClientStatus != structs.AllocClientStatusLost {
			covered[a.Index()] = true
		}
	}
	return j.TaskGroups[0].Count - len(covered)
}

// oracleNodeClass returns why node n must not run group tg of job j, or "":
// the class rules of website/docs/scheduling.md written out again. An
// opportunistic node runs only groups that opt in (the group's
// availability, else the job's); a node that reserves capabilities runs
// only groups requiring one of them; a group requiring capabilities (the
// job's and its own) runs only on nodes reserving all of them.
func oracleNodeClass(n *structs.Node, j *structs.Job, tg *structs.TaskGroup) string {
	avail := tg.Availability
	if avail == "" {
		avail = j.Availability
	}
	if n.Availability == structs.AvailabilityOpportunistic && avail != structs.AvailabilityOpportunistic {
		return "opportunistic node runs a group that did not opt in"
	}
	need := map[string]bool{}
	for _, r := range j.Requires {
		need[r] = true
	}
	for _, r := range tg.Requires {
		need[r] = true
	}
	reserved := map[string]bool{}
	for _, r := range n.Reserved {
		reserved[r] = true
	}
	if len(reserved) > 0 {
		any := false
		for r := range need {
			any = any || reserved[r]
		}
		if !any {
			return fmt.Sprintf("node reserved for %v runs a group requiring none of it", n.Reserved)
		}
	}
	for r := range need {
		if !reserved[r] {
			return fmt.Sprintf("group requires %q, which the node does not offer", r)
		}
	}
	return ""
}

// greedyFits is an oracle independent of the scheduler: it reports whether
// n more allocations of the job's group fit on the cluster as it is,
// trying nodes in ID order and, on each, the first free device instances.
// It may miss a fit the scheduler would find, never the reverse, so a true
// answer for a queued group is a scheduler bug.
func greedyFits(h *harness, j *structs.Job, n int) bool {
	tg := j.TaskGroups[0]
	extra := map[string][]*structs.Allocation{}
	ids := make([]string, 0, len(h.state.nodes))
	for id := range h.state.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for k := 0; k < n; k++ {
		placed := false
		for _, id := range ids {
			node := h.state.nodes[id]
			if oracleNodeClass(node, j, tg) != "" || node.Status != structs.NodeStatusReady || node.SchedulingEligibility == structs.NodeSchedulingIneligible {
				continue
			}
			existing := append(reservedView(h, j, h.state.byNode[id]), extra[id]...)
			a := greedyAlloc(node, j, existing)
			if a == nil {
				continue
			}
			if len(oracleNodeProblems(node, append(existing, a))) == 0 {
				extra[id] = append(extra[id], a)
				placed = true
				break
			}
		}
		if !placed {
			return false
		}
	}
	return true
}

// reservedView returns the node's allocations as job j must see them:
// an allocation evicted for a job of higher priority than j that still
// waits for allocations keeps holding its resources (it is reserved for
// that job), even after its client stopped it.
func reservedView(h *harness, j *structs.Job, allocs []*structs.Allocation) []*structs.Allocation {
	out := make([]*structs.Allocation, 0, len(allocs))
	for _, a := range allocs {
		if a.DesiredStatus == structs.AllocDesiredStatusEvict && a.PreemptedByJob != "" && a.PreemptedByJob != j.ID && a.ClientTerminalStatus() {
			x := h.state.jobs[a.PreemptedByJob]
			if x != nil && !x.Stop && x.Priority > j.Priority {
				have := 0
				for _, b := range h.state.byJob[x.ID] {
					if b.DesiredStatus == structs.AllocDesiredStatusRun && (!b.ClientTerminalStatus() || b.ClientStatus == structs.AllocClientStatusComplete) {
						have++
					}
				}
				if have < x.TaskGroups[0].Count {
					c := a.Copy()
					c.ClientStatus = structs.AllocClientStatusRunning
					a = c
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// greedyAlloc builds an allocation of the job's one task on node, taking
// the first matching healthy instances that are free (whole requests) or
// the first with room for the share; nil when the devices are not there.
func greedyAlloc(node *structs.Node, j *structs.Job, existing []*structs.Allocation) *structs.Allocation {
	task := j.TaskGroups[0].Tasks[0]
	tr := &structs.AllocatedTaskResources{CPU: int64(task.Resources.CPU), MemoryMB: int64(task.Resources.MemoryMB)}
	whole, shared := map[string]bool{}, map[string]int64{}
	for _, a := range existing {
		if !a.HoldsResources() || a.AllocatedResources == nil {
			continue
		}
		for _, t := range a.AllocatedResources.Tasks {
			for _, d := range t.Devices {
				for _, id := range d.DeviceIDs {
					if d.MemoryMB > 0 {
						shared[id] += d.MemoryMB
					} else {
						whole[id] = true
					}
				}
			}
		}
	}
	for _, req := range task.Resources.Devices {
		var got *structs.AllocatedDeviceResource
		for _, g := range node.NodeResources.Devices {
			if !oracleDeviceMatches(g, req) {
				continue
			}
			var ids []string
			for _, in := range g.Instances {
				if !in.Healthy || whole[in.ID] {
					continue
				}
				if req.MemoryMB > 0 {
					if shared[in.ID]+int64(req.MemoryMB) <= oracleGroupMem(g) {
						ids = []string{in.ID}
						break
					}
					continue
				}
				if shared[in.ID] == 0 {
					ids = append(ids, in.ID)
				}
				if len(ids) == req.Count {
					break
				}
			}
			if len(ids) == req.Count {
				got = &structs.AllocatedDeviceResource{Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: ids, MemoryMB: int64(req.MemoryMB)}
				break
			}
		}
		if got == nil {
			return nil
		}
		tr.Devices = append(tr.Devices, got)
	}
	return &structs.Allocation{
		ID: structs.GenerateUUID(), JobID: j.ID, Job: j, TaskGroup: j.TaskGroups[0].Name,
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{task.Name: tr}},
	}
}

// describe summarises the cluster for a failure message.
func describe(h *harness, j *structs.Job) string {
	s := fmt.Sprintf("job %s %s prio %d group %+v task %+v", j.ID, j.Type, j.Priority, *j.TaskGroups[0], *j.TaskGroups[0].Tasks[0].Resources)
	for _, d := range j.TaskGroups[0].Tasks[0].Resources.Devices {
		s += fmt.Sprintf(" dev %+v", *d)
	}
	s += ";"
	for _, n := range h.state.nodes {
		s += fmt.Sprintf(" node %s unified=%v reserved=%v avail=%q cpu=%d mem=%d allocs=%d;", n.ID, n.IsUnified(), n.Reserved, n.Availability, n.HostCPUMHz(), n.HostMemoryMiB(), len(h.state.byNode[n.ID]))
	}
	return s
}
