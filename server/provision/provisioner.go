package provision

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
)

// Defaults of Config's zero values.
const (
	DefaultInterval          = time.Second
	DefaultCreateTimeout     = 5 * time.Minute
	DefaultCallTimeout       = time.Minute
	DefaultMaxAttempts       = 8
	DefaultBackoffBase       = 2 * time.Second
	DefaultBackoffMax        = 5 * time.Minute
	DefaultMaxInFlight       = 16
	DefaultReconcileInterval = 30 * time.Second
	DefaultGCAge             = time.Hour
	// DefaultKeepPerPool is how many finished requests per pool GC keeps
	// whatever their age (the last decisions a status shows).
	DefaultKeepPerPool = 50
)

// reasonReconcilePrefix starts the Reason of requests the reconcile
// writes (orphans, hosts gone); they are not scaling decisions and do not
// restart the cooldown.
const reasonReconcilePrefix = "reconcile: "

// ErrNoProvider is returned (wrapped) when a pool names a provider the
// server does not have.
var ErrNoProvider = errors.New("provision: no such provider")

// Config configures a Provisioner. Logger, State, Apply, Pools and
// Provider are required.
type Config struct {
	Logger hclog.Logger
	// State returns the current state store (it changes on a snapshot
	// restore).
	State func() *state.StateStore
	// Apply commits a Raft entry and returns the FSM's response and the
	// entry's index.
	Apply func(t structs.MessageType, msg interface{}) (interface{}, uint64, error)
	// Pools returns the node pools of the state store.
	Pools func(s *state.StateStore) ([]*structs.NodePool, error)
	// Provider returns the provider of a pool with a scaling policy;
	// errors wrap ErrNoProvider for an unknown one.
	Provider func(pool *structs.NodePool) (Provider, error)
	// Join is what new hosts need to join the cluster.
	Join func() JoinInfo
	// Drain starts a drain of the node without a deadline (batch
	// allocations run to completion; services move). Required for
	// scale-in; nil disables scale-in.
	Drain func(ctx context.Context, nodeID string) error
	// Deregister removes the node of a host whose terminate succeeded
	// (marked down, its allocations lost, then purged), so no dead
	// provisioned node lingers in `node status`. nil: the node goes down
	// by heartbeat and the garbage collector removes it later.
	Deregister func(ctx context.Context, nodeID string) error
	// DeviceStats returns a node's latest GPU telemetry, or nil when the
	// client reports none. nil: no node has stats (a pool's GPU idle rule
	// then never holds).
	DeviceStats func(ctx context.Context, node *structs.Node) (*structs.NodeDeviceStats, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Interval is how often the provisioner decides and dispatches;
	// 0 means DefaultInterval.
	Interval time.Duration
	// CreateTimeout bounds one Create call, CallTimeout one Terminate or
	// List call; 0 means the defaults.
	CreateTimeout, CallTimeout time.Duration
	// MaxAttempts is how many failed calls a request gets before it is
	// canceled as failed for good; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retry delay: base * 2^(n-1),
	// at most max, plus up to a quarter more (a jitter derived from the
	// request ID, so it is the same on every server).
	BackoffBase, BackoffMax time.Duration
	// MaxInFlight bounds the provider calls running at once per pool;
	// 0 means DefaultMaxInFlight.
	MaxInFlight int
	// ReconcileInterval is how often each pool's hosts are listed and
	// matched to the records (also once at start); 0 means the default.
	ReconcileInterval time.Duration
	// GCAge is how long finished requests are kept (beyond the newest
	// KeepPerPool of each pool); 0 means the defaults.
	GCAge       time.Duration
	KeepPerPool int
	// Metrics, when set, counts calls and failures.
	Metrics *Metrics
}

// Provisioner runs on the leader: it decides scale-up and scale-in,
// records the decisions as provision requests in Raft, and executes them
// with provider calls made outside every lock, each in its own goroutine
// with a deadline, so one slow provider or pool never slows another or
// the API.
type Provisioner struct {
	cfg    Config
	logger hclog.Logger

	mu sync.Mutex
	// inFlight holds the IDs of requests with a provider call running.
	inFlight map[string]bool
	// poolInFlight counts running calls per pool (with inFlight).
	poolInFlight map[string]int
	// reconciling holds pools whose List runs; lastReconcile when each
	// last started.
	reconciling   map[string]bool
	lastReconcile map[string]time.Time
	// idle tracks, per node ID, since when the node has been idle by its
	// pool's rule (and since when its GPUs were below the threshold).
	idle map[string]idleMark
	wg   sync.WaitGroup
}

// New checks cfg and returns a Provisioner.
func New(cfg Config) (*Provisioner, error) {
	if cfg.State == nil || cfg.Apply == nil || cfg.Pools == nil || cfg.Provider == nil {
		return nil, errors.New("provision: State, Apply, Pools and Provider are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Join == nil {
		cfg.Join = func() JoinInfo { return JoinInfo{} }
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Interval, DefaultInterval)
	def(&cfg.CreateTimeout, DefaultCreateTimeout)
	def(&cfg.CallTimeout, DefaultCallTimeout)
	def(&cfg.BackoffBase, DefaultBackoffBase)
	def(&cfg.BackoffMax, DefaultBackoffMax)
	def(&cfg.ReconcileInterval, DefaultReconcileInterval)
	def(&cfg.GCAge, DefaultGCAge)
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.KeepPerPool <= 0 {
		cfg.KeepPerPool = DefaultKeepPerPool
	}
	return &Provisioner{
		cfg: cfg, logger: cfg.Logger.Named("provision"),
		inFlight: map[string]bool{}, poolInFlight: map[string]int{},
		reconciling: map[string]bool{}, lastReconcile: map[string]time.Time{},
		idle: map[string]idleMark{},
	}, nil
}

// Run decides and executes until ctx ends (leadership lost), then waits
// for its provider calls to return (each bounded by its deadline; ctx's
// end cancels them). Each pool is reconciled with its provider's hosts
// before its first creates are dispatched.
func (p *Provisioner) Run(ctx context.Context) {
	defer p.wg.Wait()
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step runs one round for every pool with a scaling policy: reconcile
// (when due; in the background), gang teardown, scale-up and scale-in
// decisions, GC, and dispatch of due provider calls. Errors are logged;
// one pool's failure does not stop the others.
func (p *Provisioner) Step(ctx context.Context) {
	st := p.cfg.State()
	pools, err := p.cfg.Pools(st)
	if err != nil {
		p.logger.Warn("list node pools", "error", err)
		return
	}
	now := p.cfg.Now()
	var blocked []*structs.Evaluation
	jobs := map[string]*structs.Job{}
	evals, err := st.Evals(nil)
	if err != nil {
		p.logger.Warn("list evaluations", "error", err)
		return
	}
	for _, e := range evals {
		if e.Status != structs.EvalStatusBlocked {
			continue
		}
		blocked = append(blocked, e)
		key := e.Namespace + "/" + e.JobID
		if _, ok := jobs[key]; !ok {
			j, err := st.JobByID(nil, e.JobID)
			if err != nil {
				p.logger.Warn("read job of blocked evaluation", "job_id", e.JobID, "error", err)
			}
			jobs[key] = j
		}
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	owners := anyPoolOwners(pools, blocked, jobs)
	for _, pool := range pools {
		if pool == nil || pool.Scaling == nil || ctx.Err() != nil {
			continue
		}
		if err := p.stepPool(ctx, st, pool, blocked, jobs, owners, now); err != nil && ctx.Err() == nil {
			p.logger.Warn("pool step failed", "pool", pool.Name, "error", err)
		}
	}
}

// stepPool runs one round for one pool.
func (p *Provisioner) stepPool(ctx context.Context, st *state.StateStore, pool *structs.NodePool, blocked []*structs.Evaluation, jobs map[string]*structs.Job, owners map[string]string, now time.Time) error {
	if p.reconcileDue(pool.Name, now) {
		p.startReconcile(ctx, pool)
	}
	if p.reconcilePending(pool.Name) {
		return nil // decide and dispatch once the records match the provider
	}
	reqs, err := st.ProvisionRequestsByPool(nil, pool.Name)
	if err != nil {
		return err
	}
	v := newPoolView(pool, reqs)
	if err := p.teardownGangs(v, now); err != nil {
		return fmt.Errorf("gang teardown: %w", err)
	}
	nodes, err := poolNodes(st, pool.Name)
	if err != nil {
		return err
	}
	notReady, err := hostsComing(st, v, nodes)
	if err != nil {
		return err
	}
	needs, byKey, _ := blockedDemand(pool, blocked, jobs, owners)
	for _, d := range decideScaleUp(v, needs, byKey, notReady, now.UnixNano()) {
		if err := p.recordCreates(pool, d, now); err != nil {
			return fmt.Errorf("record scale-up: %w", err)
		}
	}
	if len(needs) == 0 {
		if err := p.scaleIn(ctx, st, v, nodes, now); err != nil {
			return fmt.Errorf("scale-in: %w", err)
		}
	}
	if err := p.gc(v.pool.Name, reqs, v, now); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	// Re-read: the decisions above may have added requests.
	reqs, err = st.ProvisionRequestsByPool(nil, pool.Name)
	if err != nil {
		return err
	}
	p.dispatch(ctx, pool, reqs, now)
	return nil
}

// hostsComing counts the pool's hosts still to serve blocked work: not
// joined, not ready, or ready and running nothing (the blocked
// evaluations are placed there next; if they do not fit, another host of
// the same shape would not fit them either). Hosts being terminated or
// leaving (draining) do not count.
func hostsComing(st *state.StateStore, v *poolView, nodes map[string]*structs.Node) (int, error) {
	n := 0
	for _, r := range v.live {
		if _, term := v.terminating[r.HostID]; term {
			continue
		}
		node := nodes[r.NodeName]
		if node == nil || node.Status != structs.NodeStatusReady {
			n++
			continue
		}
		if !node.Ready() || node.DrainStrategy != nil {
			continue // leaving (scale-in): takes no new work
		}
		w, err := workOn(st, node.ID)
		if err != nil {
			return 0, err
		}
		if w.running == 0 {
			n++
		}
	}
	return n, nil
}

// poolNodes returns the pool's nodes by name.
func poolNodes(st *state.StateStore, pool string) (map[string]*structs.Node, error) {
	all, err := st.Nodes(nil)
	if err != nil {
		return nil, err
	}
	out := map[string]*structs.Node{}
	for _, n := range all {
		np := n.NodePool
		if np == "" {
			np = structs.NodePoolDefault
		}
		if np != pool {
			continue
		}
		// The newest registration of a name wins (a host replaced under
		// the same name registers a new node).
		if old := out[n.Name]; old == nil || n.CreateIndex > old.CreateIndex {
			out[n.Name] = n
		}
	}
	return out, nil
}

// recordCreates records one scale-up decision's create requests in one
// Raft entry.
func (p *Provisioner) recordCreates(pool *structs.NodePool, d scaleUp, now time.Time) error {
	if d.count <= 0 {
		return nil
	}
	reqs := make([]*structs.ProvisionRequest, 0, d.count)
	for i := 0; i < d.count; i++ {
		id := structs.GenerateUUID()
		reqs = append(reqs, &structs.ProvisionRequest{
			ID: id, Pool: pool.Name, Op: structs.ProvisionOpCreate, IdempotencyKey: id,
			Shape: pool.Scaling.Shape, NodeName: pool.Name + "-" + id[:8], GroupKey: d.groupKey,
			Reason: truncate(d.reason, structs.MaxProvisionReasonLen), Status: structs.ProvisionStatusPending,
			CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
		})
	}
	if _, _, err := p.cfg.Apply(structs.ProvisionRequestUpsertRequestType, &structs.ProvisionRequestUpsertRequest{Requests: reqs}); err != nil {
		return err
	}
	p.logger.Info("scale-up decided", "pool", pool.Name, "hosts", d.count, "group", d.groupKey, "reason", d.reason)
	return nil
}

// recordTerminate records a terminate request for a host.
func (p *Provisioner) recordTerminate(pool, hostID, nodeName, groupKey, reason string, now time.Time) error {
	id := structs.GenerateUUID()
	r := &structs.ProvisionRequest{
		ID: id, Pool: pool, Op: structs.ProvisionOpTerminate, IdempotencyKey: id, HostID: hostID, NodeName: nodeName,
		GroupKey: groupKey, Reason: truncate(reason, structs.MaxProvisionReasonLen), Status: structs.ProvisionStatusPending,
		CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
	}
	_, _, err := p.cfg.Apply(structs.ProvisionRequestUpsertRequestType, &structs.ProvisionRequestUpsertRequest{Requests: []*structs.ProvisionRequest{r}})
	if err == nil {
		p.logger.Info("terminate decided", "pool", pool, "host_id", hostID, "node", nodeName, "reason", reason)
	}
	return err
}

// teardownGangs tears down every gang set one of whose creates failed for
// good: its pending creates are canceled and its made hosts terminated,
// so no set is left half-made.
func (p *Provisioner) teardownGangs(v *poolView, now time.Time) error {
	keys := make([]string, 0, len(v.groups))
	for k := range v.groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set := v.groups[k]
		failed := false
		for _, r := range set {
			if r.Status == structs.ProvisionStatusCanceled {
				failed = true
			}
		}
		if !failed {
			continue
		}
		for _, r := range set {
			switch {
			case !r.Finished():
				if p.isInFlight(r.ID) {
					continue // canceled once its call returns (next round)
				}
				if _, err := p.applyResult(&structs.ProvisionResultRequest{ID: r.ID, ExpectedIndex: r.ModifyIndex,
					Status: structs.ProvisionStatusCanceled, Error: r.Error, Attempts: r.Attempts, UpdatedAt: now.UnixNano()}); err != nil {
					return err
				}
			case r.Status == structs.ProvisionStatusComplete && r.HostID != "":
				if _, busy := v.terminating[r.HostID]; busy || !isLive(v, r) {
					continue
				}
				if err := p.recordTerminate(v.pool.Name, r.HostID, r.NodeName, k,
					fmt.Sprintf("gang %s incomplete (a member failed for good): tear down -1", k), now); err != nil {
					return err
				}
				v.terminating[r.HostID] = r
			}
		}
	}
	return nil
}

func isLive(v *poolView, r *structs.ProvisionRequest) bool {
	for _, l := range v.live {
		if l.ID == r.ID {
			return true
		}
	}
	return false
}

// applyResult applies a result entry and reports whether it applied
// (false: stale, dropped by the FSM).
func (p *Provisioner) applyResult(res *structs.ProvisionResultRequest) (bool, error) {
	resp, _, err := p.cfg.Apply(structs.ProvisionResultRequestType, res)
	if err != nil {
		return false, err
	}
	r, ok := resp.(*structs.ProvisionResultResponse)
	if !ok || !r.Applied {
		p.cfg.Metrics.stale()
		return false, nil
	}
	return true, nil
}

func (p *Provisioner) isInFlight(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight[id]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
