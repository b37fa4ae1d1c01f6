package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// fakeState is an in-memory State. Objects in it are never mutated after
// insert: updates copy, change and replace, as the real state store does.
type fakeState struct {
	index  uint64
	nodes  map[string]*structs.Node
	jobs   map[string]*structs.Job
	allocs map[string]*structs.Allocation
	byNode map[string][]*structs.Allocation
	byJob  map[string][]*structs.Allocation
	// sortedNodes caches Nodes in ID order, as go-memdb returns them.
	sortedNodes []*structs.Node
	// deployments by ID.
	deployments map[string]*structs.Deployment
	// aliases are the promoted endpoint aliases.
	aliases []*structs.EndpointAlias
}

func newFakeState() *fakeState {
	return &fakeState{
		index:  1,
		nodes:  map[string]*structs.Node{},
		jobs:   map[string]*structs.Job{},
		allocs: map[string]*structs.Allocation{},
		byNode: map[string][]*structs.Allocation{},
		byJob:  map[string][]*structs.Allocation{},

		deployments: map[string]*structs.Deployment{},
	}
}

func (s *fakeState) Nodes() ([]*structs.Node, error) {
	if s.sortedNodes == nil {
		for _, n := range s.nodes {
			s.sortedNodes = append(s.sortedNodes, n)
		}
		sort.Slice(s.sortedNodes, func(i, j int) bool { return s.sortedNodes[i].ID < s.sortedNodes[j].ID })
	}
	return slices.Clone(s.sortedNodes), nil
}

func (s *fakeState) NodeByID(id string) (*structs.Node, error) { return s.nodes[id], nil }
func (s *fakeState) JobByID(id string) (*structs.Job, error)   { return s.jobs[id], nil }
func (s *fakeState) LatestIndex() (uint64, error)              { return s.index, nil }
func (s *fakeState) EndpointAliasesByEndpoint(ns, endpoint string) ([]*structs.EndpointAlias, error) {
	var out []*structs.EndpointAlias
	for _, a := range s.aliases {
		if a.Namespace == ns && a.Endpoint == endpoint {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *fakeState) LatestDeploymentByJobID(jobID string) (*structs.Deployment, error) {
	var latest *structs.Deployment
	for _, d := range s.deployments {
		if d.JobID == jobID && (latest == nil || d.CreateIndex > latest.CreateIndex) {
			latest = d
		}
	}
	return latest, nil
}

func (s *fakeState) AllocsByJob(id string) ([]*structs.Allocation, error) {
	return slices.Clone(s.byJob[id]), nil
}

func (s *fakeState) AllocsByNode(id string) ([]*structs.Allocation, error) {
	return slices.Clone(s.byNode[id]), nil
}

// replaceOrAppend replaces the allocation with a's ID in list, or appends a.
func replaceOrAppend(list []*structs.Allocation, a *structs.Allocation) []*structs.Allocation {
	for i, b := range list {
		if b.ID == a.ID {
			list[i] = a
			return list
		}
	}
	return append(list, a)
}

func (s *fakeState) upsertNode(n *structs.Node) {
	s.index++
	n.ModifyIndex = s.index
	s.nodes[n.ID] = n
	s.sortedNodes = nil
}

// upsertJob stores a copy of job with a new JobModifyIndex.
func (s *fakeState) upsertJob(job *structs.Job) *structs.Job {
	s.index++
	j := job.Copy()
	j.JobModifyIndex, j.ModifyIndex = s.index, s.index
	if old := s.jobs[j.ID]; old != nil {
		j.CreateIndex = old.CreateIndex
	} else {
		j.CreateIndex = s.index
	}
	s.jobs[j.ID] = j
	return j
}

func (s *fakeState) upsertAlloc(a *structs.Allocation) {
	if old := s.allocs[a.ID]; old != nil {
		a.CreateIndex = old.CreateIndex
	} else {
		a.CreateIndex = s.index
	}
	a.ModifyIndex = s.index
	s.allocs[a.ID] = a
	s.byNode[a.NodeID] = replaceOrAppend(s.byNode[a.NodeID], a)
	s.byJob[a.JobID] = replaceOrAppend(s.byJob[a.JobID], a)
}

// setClientStatus plays the client reporting a status for allocations.
func (s *fakeState) setClientStatus(status string, allocs ...*structs.Allocation) {
	s.index++
	for _, a := range allocs {
		c := s.allocs[a.ID].Copy()
		c.ClientStatus = status
		s.upsertAlloc(c)
	}
}

// liveAllocs returns the job's allocations that are desired to run and not
// client-terminal, by name.
func (s *fakeState) liveAllocs(jobID string) []*structs.Allocation {
	var out []*structs.Allocation
	for _, a := range s.byJob[jobID] {
		if !a.TerminalStatus() {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// fakePlanner applies plans to a fakeState after the same checks the
// server's plan applier makes, refusing a node's whole part of the plan
// (stops and placements) when it would over-commit the node.
type fakePlanner struct {
	state   *fakeState
	evals   map[string]*structs.Evaluation
	created []*structs.Evaluation
	plans   []*structs.Plan
	// beforeApply, when set, runs before each plan is checked; tests use
	// it to play a concurrent writer.
	beforeApply func(plan *structs.Plan)
	// rejectAll refuses every node of every plan.
	rejectAll bool
}

func newFakePlanner(s *fakeState) *fakePlanner {
	return &fakePlanner{state: s, evals: map[string]*structs.Evaluation{}}
}

func (p *fakePlanner) SubmitPlan(plan *structs.Plan) (*structs.PlanResult, State, error) {
	p.plans = append(p.plans, plan)
	if p.beforeApply != nil {
		p.beforeApply(plan)
	}
	s := p.state
	res := &structs.PlanResult{NodeUpdate: map[string][]*structs.Allocation{}, NodeAllocation: map[string][]*structs.Allocation{}}
	nodeIDs := map[string]bool{}
	for id := range plan.NodeUpdate {
		nodeIDs[id] = true
	}
	for id := range plan.NodeAllocation {
		nodeIDs[id] = true
	}
	s.index++
	refused := map[string]bool{}
	for id := range nodeIDs {
		if p.rejectAll || checkNodePlan(s, id, plan.NodeAllocation[id]) != nil {
			refused[id] = true
		}
	}
	// A gang is committed whole or not at all, as the server's applier does.
	if len(refused) > 0 {
		for id, allocs := range plan.NodeAllocation {
			for _, a := range allocs {
				if a.Gang != nil && a.CreateIndex == 0 {
					refused[id] = true
				}
			}
		}
	}
	for id := range nodeIDs {
		if refused[id] {
			res.RejectedNodes = append(res.RejectedNodes, id)
			continue
		}
		for _, a := range plan.NodeUpdate[id] {
			c := s.allocs[a.ID].Copy()
			c.DesiredStatus, c.DesiredDescription, c.PreemptedByJob = a.DesiredStatus, a.DesiredDescription, a.PreemptedByJob
			s.upsertAlloc(c)
		}
		for _, a := range plan.NodeAllocation[id] {
			s.upsertAlloc(a.Copy())
		}
		res.NodeUpdate[id] = plan.NodeUpdate[id]
		res.NodeAllocation[id] = plan.NodeAllocation[id]
	}
	res.AllocIndex = s.index
	if len(res.RejectedNodes) > 0 {
		res.RefreshIndex = s.index
		return res, s, nil
	}
	return res, nil, nil
}

func (p *fakePlanner) UpdateEval(eval *structs.Evaluation) error {
	p.evals[eval.ID] = eval.Copy()
	return nil
}

func (p *fakePlanner) CreateEval(eval *structs.Evaluation) error {
	p.created = append(p.created, eval.Copy())
	p.evals[eval.ID] = eval.Copy()
	return nil
}

// checkNodePlan reports why placing allocs on the node would over-commit
// it: CPU or memory above capacity after reserved resources, a device
// instance that is unknown, unhealthy or held twice, or a node not ready.
// Allocations whose ID already exists are updates and replace the stored
// one in the count.
func checkNodePlan(s *fakeState, nodeID string, allocs []*structs.Allocation) error {
	if len(allocs) == 0 {
		return nil
	}
	n := s.nodes[nodeID]
	if n == nil {
		return fmt.Errorf("node %s does not exist", nodeID)
	}
	if !n.Ready() {
		return fmt.Errorf("node %s is not ready", nodeID)
	}
	updating := map[string]bool{}
	for _, a := range allocs {
		updating[a.ID] = true
	}
	all := slices.Clone(allocs)
	for _, a := range s.byNode[nodeID] {
		if !updating[a.ID] {
			all = append(all, a)
		}
	}
	return checkNodeAllocs(n, all)
}

// checkNodeAllocs checks the allocations that hold resources on n with
// structs.AllocsFit, the plan applier's own rules.
func checkNodeAllocs(n *structs.Node, allocs []*structs.Allocation) error {
	if ok, reason := structs.AllocsFit(n, allocs); !ok {
		return fmt.Errorf("node %s: %s", n.ID, reason)
	}
	return nil
}

// checkInvariants fails the test when any node is over-committed, any
// device instance is held twice, or a task does not hold exactly the
// devices it asked for. It uses the oracle in oracle_test.go, not
// structs.AllocsFit: the fake planner already enforces AllocsFit, so a
// check by the same function could not catch a bug in it.
func checkInvariants(t testing.TB, s *fakeState) {
	t.Helper()
	checkOracle(t, s)
}

// harness ties a fakeState and fakePlanner together.
type harness struct {
	t       testing.TB
	state   *fakeState
	planner *fakePlanner
}

func newHarness(t testing.TB) *harness {
	s := newFakeState()
	return &harness{t: t, state: s, planner: newFakePlanner(s)}
}

// process runs one evaluation and returns the evaluation as last updated.
func (h *harness) process(eval *structs.Evaluation) *structs.Evaluation {
	h.t.Helper()
	sched, err := New(eval.Type, h.state, h.planner)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	if err := sched.Process(eval); err != nil {
		h.t.Fatalf("Process: %v", err)
	}
	got := h.planner.evals[eval.ID]
	if got == nil {
		h.t.Fatalf("eval %s was not updated", eval.ID)
	}
	return got
}

// register stores the job and processes its registration evaluation.
func (h *harness) register(job *structs.Job) *structs.Evaluation {
	h.t.Helper()
	j := h.state.upsertJob(job)
	return h.process(newEval(j, structs.EvalTriggerJobRegister))
}

// stop marks the job stopped and processes its deregistration evaluation.
func (h *harness) stop(jobID string) *structs.Evaluation {
	h.t.Helper()
	j := h.state.jobs[jobID].Copy()
	j.Stop = true
	j = h.state.upsertJob(j)
	return h.process(newEval(j, structs.EvalTriggerJobDeregister))
}

func newEval(j *structs.Job, trigger string) *structs.Evaluation {
	return &structs.Evaluation{
		ID: structs.GenerateUUID(), Namespace: j.Namespace, Priority: j.Priority, Type: j.Type,
		TriggeredBy: trigger, JobID: j.ID, JobModifyIndex: j.JobModifyIndex, Status: structs.EvalStatusPending,
	}
}

// gpuNode returns a ready linux node in dc1 with the native and docker
// drivers, 32000 MHz of CPU, 256 GiB of memory and gpus GPUs of the model,
// each with memMiB of memory.
func gpuNode(id string, gpus int, model string, memMiB int64) *structs.Node {
	n := &structs.Node{
		ID: id, Name: "name-" + id, Datacenter: "dc1", NodeClass: "gpu",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.numcores": "32"},
		Meta:       map[string]string{},
		Drivers: map[string]*structs.DriverInfo{
			"native": {Detected: true, Healthy: true},
			"docker": {Detected: true, Healthy: true},
		},
		NodeResources:         &structs.NodeResources{CPU: 32000, Cores: 32, MemoryMB: 256 * 1024},
		ReservedResources:     &structs.NodeReservedResources{CPU: 1000, MemoryMB: 1024},
		Status:                structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
	if gpus > 0 {
		g := &structs.DeviceGroup{
			Vendor: structs.DeviceVendorNvidia, Type: structs.DeviceTypeGPU, Name: model,
			Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(memMiB, "MiB")},
		}
		for i := 0; i < gpus; i++ {
			g.Instances = append(g.Instances, &structs.DeviceInstance{ID: fmt.Sprintf("GPU-%s-%d", id, i), Healthy: true})
		}
		n.NodeResources.Devices = []*structs.DeviceGroup{g}
	}
	return n
}

// gpuJob returns a canonicalized job with one group "g" of count
// allocations, one native task asking for cpu MHz, mem MiB and gpus GPUs.
func gpuJob(id, typ string, count, gpus, cpu, mem int) *structs.Job {
	task := &structs.Task{
		Name: "t", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"},
		Resources: &structs.Resources{CPU: cpu, MemoryMB: mem},
	}
	if gpus > 0 {
		task.Resources.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: gpus}}
	}
	j := &structs.Job{ID: id, Type: typ, TaskGroups: []*structs.TaskGroup{{Name: "g", Count: count, Tasks: []*structs.Task{task}}}}
	j.Canonicalize()
	return j
}
