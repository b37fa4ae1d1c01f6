package provision

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"
)

// fakeProvider is an in-test Provider: hosts in a map, with switches for
// slow, failing and duplicate answers.
type fakeProvider struct {
	mu      sync.Mutex
	hosts   map[string]Host // by ID
	creates int             // Create calls
	terms   int
	// block, when set, holds every Create until it is closed (a slow
	// provider).
	block chan struct{}
	// fail, when set, is returned by Create; failList by List.
	fail     error
	failList error
	// failKey fails Create only for these idempotency keys.
	failKey map[string]bool
	next    int
	// joins are the JoinInfo of every Create call.
	joins []JoinInfo
}

func newFakeProvider() *fakeProvider { return &fakeProvider{hosts: map[string]Host{}} }

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Create(ctx context.Context, req CreateRequest) (Host, error) {
	f.mu.Lock()
	f.creates++
	f.joins = append(f.joins, req.Join)
	block, fail := f.block, f.fail
	if f.failKey[req.IdempotencyKey] {
		fail = errors.New("no capacity for this one")
	}
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Host{}, ctx.Err()
		}
	}
	if fail != nil {
		return Host{}, fail
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hosts {
		if h.IdempotencyKey == req.IdempotencyKey {
			return h, nil // idempotent
		}
	}
	f.next++
	h := Host{ID: fmt.Sprintf("host-%d", f.next), Pool: req.Pool, IdempotencyKey: req.IdempotencyKey, NodeName: req.NodeName, State: "running"}
	f.hosts[h.ID] = h
	return h, nil
}

func (f *fakeProvider) Terminate(ctx context.Context, pool, hostID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terms++
	if _, ok := f.hosts[hostID]; !ok {
		return ErrHostNotFound
	}
	delete(f.hosts, hostID)
	return nil
}

func (f *fakeProvider) List(ctx context.Context, pool string) ([]Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failList != nil {
		return nil, f.failList
	}
	var out []Host
	for _, h := range f.hosts {
		if pool == "" || h.Pool == pool {
			out = append(out, h)
		}
	}
	return out, nil
}

func (f *fakeProvider) count() (hosts, creates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hosts), f.creates
}

// addHost puts a host in the provider as if an earlier leader made it.
func (f *fakeProvider) addHost(h Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosts[h.ID] = h
}

// harness is a provisioner over a real FSM, applied to in order as Raft
// would, with a settable clock.
type harness struct {
	t     *testing.T
	fsm   *fsm.FSM
	mu    sync.Mutex
	index uint64
	now   time.Time
	pools map[string]*structs.NodePool
	provs map[string]*fakeProvider
	// drained lists the nodes Drain was called for.
	drained []string
	stats   map[string]*structs.NodeDeviceStats
	// entries are the encoded Raft entries applied, in order.
	entries [][]byte
	p       *Provisioner
	warmed  bool
}

func newHarness(t *testing.T, pools ...*structs.NodePool) *harness {
	t.Helper()
	f, err := fsm.New(fsm.Config{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, fsm: f, now: time.Unix(1_700_000_000, 0), pools: map[string]*structs.NodePool{}, provs: map[string]*fakeProvider{},
		stats: map[string]*structs.NodeDeviceStats{}}
	for _, p := range pools {
		h.pools[p.Name] = p
		h.provs[p.Name] = newFakeProvider()
	}
	p, err := New(Config{
		Logger: hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Warn}),
		State:  f.State,
		Apply:  h.apply,
		Pools: func(*state.StateStore) ([]*structs.NodePool, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			var out []*structs.NodePool
			for _, p := range h.pools {
				out = append(out, p)
			}
			return out, nil
		},
		Provider: func(pool *structs.NodePool) (Provider, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if fp := h.provs[pool.Name]; fp != nil {
				return fp, nil
			}
			return nil, ErrNoProvider
		},
		Drain: func(ctx context.Context, nodeID string) error {
			n, err := f.State().NodeByID(nil, nodeID)
			if err != nil || n == nil {
				return fmt.Errorf("no node %s", nodeID)
			}
			n = n.Copy()
			n.DrainStrategy = &structs.DrainStrategy{StartedAt: h.clock().UnixNano()}
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
			h.mu.Lock()
			h.drained = append(h.drained, nodeID)
			h.mu.Unlock()
			_, _, err = h.apply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			return err
		},
		DeviceStats: func(ctx context.Context, n *structs.Node) (*structs.NodeDeviceStats, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.stats[n.ID], nil
		},
		Now:         h.clock,
		BackoffBase: time.Second, BackoffMax: 8 * time.Second,
		MaxAttempts: 3,
		Metrics:     NewMetrics(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = h.now.Add(d)
}

// apply encodes msg and applies it at the next index, one at a time.
func (h *harness) apply(t structs.MessageType, msg interface{}) (interface{}, uint64, error) {
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return nil, 0, err
	}
	h.mu.Lock()
	h.entries = append(h.entries, buf)
	h.index++
	idx := h.index
	resp := h.fsm.RaftFSM().Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: buf})
	h.mu.Unlock()
	if err, ok := resp.(error); ok {
		return nil, idx, err
	}
	return resp, idx, nil
}

func (h *harness) must(t structs.MessageType, msg interface{}) {
	h.t.Helper()
	if _, _, err := h.apply(t, msg); err != nil {
		h.t.Fatal(err)
	}
}

// step runs one Step and waits for its provider calls to return. The
// first also waits for the first reconcile and steps again, as the
// provisioner decides for a pool only once its records match the
// provider.
func (h *harness) step(ctx context.Context) {
	h.p.Step(ctx)
	h.p.wg.Wait()
	if !h.warmed {
		h.warmed = true
		h.p.Step(ctx)
		h.p.wg.Wait()
	}
}

// warm runs the first Step and waits for its reconciles only (not for
// provider calls, which a test may hold).
func (h *harness) warm(ctx context.Context) {
	h.t.Helper()
	h.p.Step(ctx)
	waittest.Until(h.t, 10*time.Second, "first reconcile", func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		for name := range h.pools {
			if h.p.lastReconcile[name].IsZero() {
				return false
			}
		}
		return true
	})
	h.warmed = true
}

// settle steps until the requests of every pool are finished or the
// deadline passes.
func (h *harness) settle(ctx context.Context) {
	h.t.Helper()
	waittest.Until(h.t, 10*time.Second, "provision requests finish", func() bool {
		h.step(ctx)
		for _, r := range h.requests("") {
			if !r.Finished() {
				return false
			}
		}
		return true
	})
}

func (h *harness) requests(pool string) []*structs.ProvisionRequest {
	h.t.Helper()
	var out []*structs.ProvisionRequest
	all, err := h.fsm.State().ProvisionRequests(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range all {
		if pool == "" || r.Pool == pool {
			out = append(out, r)
		}
	}
	return out
}

func gpuPool(name string, min, max int) *structs.NodePool {
	return &structs.NodePool{Name: name, Scaling: &structs.PoolScalingPolicy{
		Provider: "fake", Min: min, Max: max, Shape: structs.NodeShape{GPUCount: 1, GPUModel: "NVIDIA H100 80GB HBM3"},
		Idle: structs.PoolIdleRule{NoAllocations: true}, IdleAfter: time.Minute,
	}}
}

// blockJob registers a batch job in pool asking for gpus GPUs per
// allocation with count allocations, and a blocked evaluation for it
// whose failed group is unplaced.
func (h *harness) blockJob(pool string, gpus, count int, gang bool) *structs.Job {
	h.t.Helper()
	job := statetest.BatchJob(gpus)
	job.NodePool = pool
	job.TaskGroups[0].Count = count
	job.TaskGroups[0].Gang = gang
	h.must(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
	e := statetest.Eval(job)
	e.Status = structs.EvalStatusBlocked
	e.FailedTGAllocs = map[string]*structs.AllocMetric{"web": {CoalescedFailures: count - 1, DimensionExhausted: map[string]int{"devices: nvidia/gpu": 1}}}
	h.must(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{e}})
	return job
}

// joinNode registers the node a created host joins as.
func (h *harness) joinNode(pool, name string) *structs.Node {
	h.t.Helper()
	n := statetest.Node(1)
	n.Name = name
	n.NodePool = pool
	h.must(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
	return n
}

func testutilCount(t *testing.T, m *Metrics, pool, op string) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.failures.WithLabelValues(pool, op).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}
