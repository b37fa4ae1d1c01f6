package deploymentwatcher

import (
	"sort"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/server/scheduler"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"
)

// harness runs the deployment state machine end to end without Raft or
// clients: a real FSM and state store, the real scheduler planning against
// snapshots (its plans applied as the plan applier would, without the
// node re-check), a simulated client that starts and stops allocations and
// reports health, and the watcher's Once on a settable clock.
type harness struct {
	t       *testing.T
	f       *fsm.FSM
	index   uint64
	now     int64
	w       *Watcher
	pending []*structs.Evaluation
	// evals holds every evaluation the scheduler updated, by ID.
	evals map[string]*structs.Evaluation
}

func newHarness(t *testing.T, nodes ...*structs.Node) *harness {
	t.Helper()
	f, err := fsm.New(fsm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), evals: map[string]*structs.Evaluation{}}
	h.w, err = New(Config{
		State:   f.State,
		Apply:   h.apply,
		Enqueue: func(e *structs.Evaluation) { h.pending = append(h.pending, e) },
		Now:     func() time.Time { return time.Unix(0, h.now) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		h.must(h.apply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n}))
	}
	return h
}

func (h *harness) must(_ uint64, err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// apply commits one entry through the FSM, as Raft would.
func (h *harness) apply(t structs.MessageType, msg interface{}) (uint64, error) {
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return 0, err
	}
	h.index++
	if resp := h.f.RaftFSM().Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: buf}); resp != nil {
		if err, ok := resp.(error); ok {
			return h.index, err
		}
	}
	return h.index, nil
}

func (h *harness) st() *state.StateStore { return h.f.State() }

// register registers job (a copy) with its evaluation and runs the
// scheduler and the client until nothing moves.
func (h *harness) register(job *structs.Job) *structs.Job {
	h.t.Helper()
	j := job.Copy()
	j.Canonicalize()
	if err := j.Validate(); err != nil {
		h.t.Fatal(err)
	}
	j.SubmitTime = h.now
	e := statetest.Eval(j)
	e.CreateTime, e.ModifyTime = h.now, h.now
	h.must(h.apply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: j, Eval: e}))
	h.pending = append(h.pending, e)
	h.settle()
	stored, _ := h.st().JobByID(nil, j.ID)
	return stored
}

// settle runs pending evaluations and plays the client (pending
// allocations start running, stopped ones finish) until nothing is left.
func (h *harness) settle() {
	h.t.Helper()
	for round := 0; round < 50; round++ {
		moved := h.client()
		if len(h.pending) == 0 && !moved {
			return
		}
		evals := h.pending
		h.pending = nil
		for _, e := range evals {
			h.process(e)
		}
	}
	h.t.Fatal("the state machine does not settle")
}

func (h *harness) process(e *structs.Evaluation) {
	h.t.Helper()
	snap, err := h.st().Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	job, _ := snap.JobByID(nil, e.JobID)
	typ := structs.JobTypeService
	if job != nil {
		typ = job.Type
	}
	s, err := scheduler.New(typ, &snapState{snap}, &planner{h})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := s.Process(e); err != nil {
		h.t.Fatal(err)
	}
}

// client plays every node's client once and reports whether it changed
// anything.
func (h *harness) client() bool {
	allocs, _ := h.st().Allocs(nil)
	var ups []*structs.Allocation
	for _, a := range allocs {
		switch {
		case a.DesiredStatus != structs.AllocDesiredStatusRun && !a.ClientTerminalStatus():
			ups = append(ups, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusComplete})
		case a.DesiredStatus == structs.AllocDesiredStatusRun && a.ClientStatus == structs.AllocClientStatusPending:
			ups = append(ups, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning})
		}
	}
	if len(ups) == 0 {
		return false
	}
	h.must(h.apply(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: ups, UpdatedAt: h.now}))
	return true
}

// health reports the client's verdict on allocations, then settles.
func (h *harness) health(healthy bool, allocs ...*structs.Allocation) {
	h.t.Helper()
	var ups []*structs.Allocation
	for _, a := range allocs {
		hv := healthy
		ups = append(ups, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning,
			DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &hv, Timestamp: h.now}})
	}
	h.must(h.apply(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: ups, UpdatedAt: h.now}))
	h.watch()
}

// watch runs the watcher once and settles what it set off.
func (h *harness) watch() {
	h.t.Helper()
	h.w.Once(memdb.NewWatchSet())
	h.settle()
}

// live returns the job's allocations desired to run, by name then
// creation.
func (h *harness) live(jobID string) []*structs.Allocation {
	allocs, _ := h.st().AllocsByJob(nil, jobID)
	var out []*structs.Allocation
	for _, a := range allocs {
		if a.DesiredStatus == structs.AllocDesiredStatusRun && !a.ClientTerminalStatus() {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].CreateIndex < out[j].CreateIndex
	})
	return out
}

// ofVersion returns the allocations in list whose job is version v.
func ofVersion(list []*structs.Allocation, v uint64) []*structs.Allocation {
	var out []*structs.Allocation
	for _, a := range list {
		if a.Job != nil && a.Job.Version == v {
			out = append(out, a)
		}
	}
	return out
}

// unverdicted returns the allocations in list without a health verdict.
func unverdicted(list []*structs.Allocation) []*structs.Allocation {
	var out []*structs.Allocation
	for _, a := range list {
		if a.DeploymentStatus == nil || a.DeploymentStatus.Healthy == nil {
			out = append(out, a)
		}
	}
	return out
}

func (h *harness) deployment(jobID string) *structs.Deployment {
	d, err := h.st().LatestDeploymentByJobID(nil, jobID)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func (h *harness) job(id string) *structs.Job {
	j, _ := h.st().JobByID(nil, id)
	return j
}

// snapState adapts a snapshot to scheduler.State.
type snapState struct{ snap *state.StateSnapshot }

func (a *snapState) Nodes() ([]*structs.Node, error)           { return a.snap.Nodes(nil) }
func (a *snapState) NodeByID(id string) (*structs.Node, error) { return a.snap.NodeByID(nil, id) }
func (a *snapState) JobByID(id string) (*structs.Job, error)   { return a.snap.JobByID(nil, id) }
func (a *snapState) LatestIndex() (uint64, error)              { return a.snap.LatestIndex() }
func (a *snapState) AllocsByJob(id string) ([]*structs.Allocation, error) {
	return a.snap.AllocsByJob(nil, id)
}
func (a *snapState) AllocsByNode(id string) ([]*structs.Allocation, error) {
	return a.snap.AllocsByNode(nil, id)
}
func (a *snapState) LatestDeploymentByJobID(id string) (*structs.Deployment, error) {
	return a.snap.LatestDeploymentByJobID(nil, id)
}
func (a *snapState) EndpointAliasesByEndpoint(ns, endpoint string) ([]*structs.EndpointAlias, error) {
	return a.snap.EndpointAliasesByEndpoint(nil, ns, endpoint)
}

// planner commits plans as the plan applier does (without its node
// re-check: the scheduler alone decides what fits here).
type planner struct{ h *harness }

func (p *planner) SubmitPlan(plan *structs.Plan) (*structs.PlanResult, scheduler.State, error) {
	h := p.h
	req := &structs.ApplyPlanResultsRequest{EvalID: plan.EvalID, Job: plan.Job, UpdatedAt: h.now,
		Deployment: plan.Deployment, DeploymentUpdates: plan.DeploymentUpdates}
	for _, allocs := range plan.NodeUpdate {
		for _, a := range allocs {
			req.AllocsStopped = append(req.AllocsStopped, structs.NormalizedStop(a))
		}
	}
	for _, allocs := range plan.NodeAllocation {
		req.AllocsPlaced = append(req.AllocsPlaced, allocs...)
	}
	index, err := h.apply(structs.ApplyPlanResultsRequestType, req)
	if err != nil {
		return nil, nil, err
	}
	return &structs.PlanResult{NodeUpdate: plan.NodeUpdate, NodeAllocation: plan.NodeAllocation, AllocIndex: index}, nil, nil
}

func (p *planner) UpdateEval(e *structs.Evaluation) error {
	p.h.evals[e.ID] = e.Copy()
	_, err := p.h.apply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{e}})
	return err
}

func (p *planner) CreateEval(e *structs.Evaluation) error {
	if e.Status == structs.EvalStatusPending {
		p.h.pending = append(p.h.pending, e)
	}
	return p.UpdateEval(e)
}
