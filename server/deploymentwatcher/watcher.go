package deploymentwatcher

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"
)

// DefaultMaxWait bounds the watcher's wait between two looks at the
// deployments when nothing changes (progress deadlines are met within it).
const DefaultMaxWait = time.Second

// Config configures a Watcher.
type Config struct {
	// Logger is the parent logger; the watcher logs as "deployment_watcher".
	// Nil means hclog.NewNullLogger().
	Logger hclog.Logger
	// State returns the current state store (a snapshot restore replaces
	// it).
	State func() *state.StateStore
	// Apply commits one Raft entry and returns its index, or the entry's
	// error.
	Apply func(t structs.MessageType, msg interface{}) (uint64, error)
	// Enqueue hands a committed pending evaluation to the eval broker.
	Enqueue func(e *structs.Evaluation)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxWait bounds a wait; zero means DefaultMaxWait.
	MaxWait time.Duration
}

// Watcher runs on the leader only (Run returns when leadership ends).
type Watcher struct {
	cfg    Config
	logger hclog.Logger
	// seen holds, per active deployment, its counters when last looked at:
	// a change means an allocation's health moved the rollout on, and the
	// job gets an evaluation.
	seen map[string]string
}

// New returns a watcher. It returns an error when State, Apply or Enqueue
// is missing.
func New(cfg Config) (*Watcher, error) {
	if cfg.State == nil || cfg.Apply == nil || cfg.Enqueue == nil {
		return nil, fmt.Errorf("deploymentwatcher: State, Apply and Enqueue are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	return &Watcher{cfg: cfg, logger: cfg.Logger.Named("deployment_watcher"), seen: map[string]string{}}, nil
}

// Run looks at every active deployment whenever the deployments table
// changes, at least every MaxWait and at each progress deadline, until
// ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	for ctx.Err() == nil {
		ws := memdb.NewWatchSet()
		wait := w.Once(ws)
		wctx, cancel := context.WithTimeout(ctx, wait)
		_ = ws.WatchCtx(wctx)
		cancel()
	}
}

// Once looks at every active deployment once, applying what Decide wants
// and an evaluation for each one whose counters changed, and returns how
// long to wait before the next look at most. Errors are logged; the next
// look tries again.
func (w *Watcher) Once(ws memdb.WatchSet) time.Duration {
	st := w.cfg.State()
	ws.Add(st.AbandonCh())
	ds, err := st.Deployments(ws)
	if err != nil {
		w.logger.Error("read deployments", "error", err)
		return w.cfg.MaxWait
	}
	now := w.cfg.Now().UnixNano()
	wait := w.cfg.MaxWait
	active := map[string]bool{}
	for _, d := range ds {
		if !d.Active() {
			continue
		}
		active[d.ID] = true
		if err := w.watch(st, d, now); err != nil {
			w.logger.Warn("deployment update failed; will retry", "deployment_id", d.ID, "job_id", d.JobID, "error", err)
		}
		for _, g := range d.TaskGroups {
			if g.RequireProgressBy > now {
				wait = min(wait, time.Duration(g.RequireProgressBy-now)+time.Millisecond)
			}
		}
	}
	for id := range w.seen {
		if !active[id] {
			delete(w.seen, id)
		}
	}
	return wait
}

// progressKey renders the counters whose change means progress.
func progressKey(d *structs.Deployment) string {
	names := make([]string, 0, len(d.TaskGroups))
	for n := range d.TaskGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	key := d.Status
	for _, n := range names {
		g := d.TaskGroups[n]
		key += fmt.Sprintf("|%s:%d/%d/%d/%v", n, g.PlacedAllocs, g.HealthyAllocs, g.UnhealthyAllocs, g.Promoted)
	}
	return key
}

func (w *Watcher) watch(st *state.StateStore, d *structs.Deployment, now int64) error {
	job, err := st.JobByID(nil, d.JobID)
	if err != nil {
		return err
	}
	if job == nil || !d.ForJob(job) {
		return nil // the scheduler cancels it with the next evaluation
	}
	versions, err := st.JobVersionsByID(nil, d.JobID)
	if err != nil {
		return err
	}
	dec := Decide(d, job, versions, now)
	switch {
	case dec.Status != nil:
		eval := w.newEval(job, now)
		req := &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: dec.Status, Job: dec.Revert, Eval: eval, UpdatedAt: now}
		if dec.Revert != nil {
			dec.Revert.SubmitTime = now
			eval.TriggeredBy = structs.EvalTriggerRollingUpdate
		}
		if err := w.commit(structs.DeploymentStatusUpdateRequestType, req, eval); err != nil {
			return err
		}
		w.logger.Info("deployment finished", "deployment_id", d.ID, "job_id", d.JobID, "status", dec.Status.Status, "description", dec.Status.StatusDescription)
		return nil
	case dec.Promote:
		var groups []string
		for name, g := range d.TaskGroups {
			if g.DesiredCanaries > 0 && !g.Promoted && g.AutoPromote && g.HealthyAllocs >= g.DesiredCanaries {
				groups = append(groups, name)
			}
		}
		sort.Strings(groups)
		eval := w.newEval(job, now)
		req := &structs.DeploymentPromoteRequest{DeploymentID: d.ID, Groups: groups, Eval: eval, UpdatedAt: now}
		if err := w.commit(structs.DeploymentPromoteRequestType, req, eval); err != nil {
			return err
		}
		w.logger.Info("deployment canaries promoted automatically", "deployment_id", d.ID, "groups", groups)
		return nil
	}
	key := progressKey(d)
	prev, known := w.seen[d.ID]
	w.seen[d.ID] = key
	if d.Status != structs.DeploymentStatusRunning || (known && prev == key) || (!known && d.TaskGroupsHealthy() == 0) {
		return nil
	}
	eval := w.newEval(job, now)
	if err := w.commit(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{eval}}, eval); err != nil {
		delete(w.seen, d.ID)
		return err
	}
	return nil
}

// commit applies the entry and hands its evaluation to the broker.
func (w *Watcher) commit(t structs.MessageType, msg interface{}, eval *structs.Evaluation) error {
	index, err := w.cfg.Apply(t, msg)
	if err != nil {
		return err
	}
	if st := w.cfg.State(); st != nil {
		if j, err := st.JobByID(nil, eval.JobID); err == nil && j != nil {
			eval.JobModifyIndex = j.JobModifyIndex
		}
	}
	eval.CreateIndex, eval.ModifyIndex = index, index
	w.cfg.Enqueue(eval)
	return nil
}

func (w *Watcher) newEval(job *structs.Job, now int64) *structs.Evaluation {
	return &structs.Evaluation{
		ID: structs.GenerateUUID(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
		TriggeredBy: structs.EvalTriggerDeploymentWatcher, JobID: job.ID, JobModifyIndex: job.JobModifyIndex,
		Status: structs.EvalStatusPending, CreateTime: now, ModifyTime: now,
	}
}
