package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
)

// clientProvider is an in-test provider whose hosts are real clients
// (agent/client) in this process, each with one simulated GPU that,
// while free, reports the next utilisation of utils: their telemetry
// reaches the leader only by their heartbeats.
type clientProvider struct {
	t     *testing.T
	mu    sync.Mutex
	srv   *server.Server
	utils []int
	hosts map[string]*clientHost
}

type clientHost struct {
	h    provision.Host
	c    *client.Client
	util int
}

func (p *clientProvider) Name() string { return "clients" }

func (p *clientProvider) Create(ctx context.Context, req provision.CreateRequest) (provision.Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.hosts {
		if ch.h.IdempotencyKey == req.IdempotencyKey {
			return ch.h, nil
		}
	}
	if len(p.utils) == 0 {
		return provision.Host{}, fmt.Errorf("no more hosts in this test")
	}
	util := p.utils[0]
	p.utils = p.utils[1:]
	g := devices.Simulated(req.NodeName, max(req.Shape.GPUCount, 1))
	g.Attributes[devices.AttrSimulatedIdleUtilization] = structs.NewIntAttribute(int64(util), "%")
	c, err := client.NewClient(&client.Config{
		DataDir: p.t.TempDir(), NodeName: req.NodeName, NodePool: req.Pool, Servers: p.srv,
		SimulatedDevices: []*structs.DeviceGroup{g}, TelemetryInterval: 50 * time.Millisecond,
		RegisterTimeout: 10 * time.Second,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: req.NodeName, Level: hclog.Warn, Output: testWriter{p.t}}),
	})
	if err != nil {
		return provision.Host{}, err
	}
	h := provision.Host{ID: "h-" + req.NodeName, Pool: req.Pool, IdempotencyKey: req.IdempotencyKey, NodeName: req.NodeName, State: "running"}
	p.hosts[h.ID] = &clientHost{h: h, c: c, util: util}
	return h, nil
}

func (p *clientProvider) Terminate(ctx context.Context, pool, hostID string) error {
	p.mu.Lock()
	ch := p.hosts[hostID]
	delete(p.hosts, hostID)
	p.mu.Unlock()
	if ch == nil {
		return provision.ErrHostNotFound
	}
	return ch.c.Shutdown()
}

func (p *clientProvider) List(ctx context.Context, pool string) ([]provision.Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []provision.Host
	for _, ch := range p.hosts {
		out = append(out, ch.h)
	}
	return out, nil
}

// utilsLeft returns the idle utilisation of each host still there.
func (p *clientProvider) utilsLeft() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, ch := range p.hosts {
		out = append(out, ch.util)
	}
	return out
}

func (p *clientProvider) shutdownAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.hosts {
		_ = ch.c.Shutdown()
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// TestProvisionerGPUIdleRuleFromHeartbeats runs a pool whose idle rule
// requires its GPUs below 10 % for a while, with two real clients that
// run nothing: one's GPU stays at 90 %, the other's at 0 %. Their
// utilisation reaches the leader only with their heartbeats. The 0 % node
// is drained, terminated and deregistered; the 90 % node, idle by every
// other measure, is never drained.
func TestProvisionerGPUIdleRuleFromHeartbeats(t *testing.T) {
	prov := &clientProvider{t: t, utils: []int{90, 0}, hosts: map[string]*clientHost{}}
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.Provision.Providers = func(*structs.NodePool) (provision.Provider, error) { return prov, nil }
		c.Provision.Interval = 50 * time.Millisecond
		c.MinHeartbeatTTL = 200 * time.Millisecond
		c.HeartbeatGrace = 500 * time.Millisecond
	}))
	prov.mu.Lock()
	prov.srv = s
	prov.mu.Unlock()
	t.Cleanup(prov.shutdownAll)
	ctx := ctxT(t)
	rule := structs.PoolIdleRule{NoAllocations: true, GPUUtilBelowPercent: 10, GPUUtilFor: 400 * time.Millisecond}
	pool := func(min int) *structs.NodePool {
		return &structs.NodePool{Name: "gpu", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Min: min, Max: 2,
			Shape: structs.NodeShape{GPUCount: 1}, IdleAfter: 200 * time.Millisecond, Idle: rule}}
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{pool(2)}); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 20*time.Second, "two provisioned clients ready", func() (bool, string) {
		nodes, err := s.State().NodesByNodePool(nil, "gpu")
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == structs.NodeStatusReady {
				ready++
			}
		}
		return ready == 2, fmt.Sprintf("%d nodes, %d ready", len(nodes), ready)
	})
	busyNode := ""
	for _, n := range mustNodes(t, s) {
		if n.Name == "" {
			continue
		}
		prov.mu.Lock()
		if ch := prov.hosts["h-"+n.Name]; ch != nil && ch.util == 90 {
			busyNode = n.ID
		}
		prov.mu.Unlock()
	}
	if busyNode == "" {
		t.Fatal("no node for the 90 % host")
	}
	// Min 0: both nodes may go, but only the one whose GPU is idle does.
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{pool(0)}); err != nil {
		t.Fatal(err)
	}
	checkBusy := func() {
		t.Helper()
		n, err := s.State().NodeByID(nil, busyNode)
		if err != nil {
			t.Fatal(err)
		}
		if n == nil {
			t.Fatal("node with its GPU at 90 % removed")
		}
		if n.DrainStrategy != nil || n.SchedulingEligibility == structs.NodeSchedulingIneligible {
			t.Fatalf("node with its GPU at 90 %% drained (eligibility %s)", n.SchedulingEligibility)
		}
	}
	waittest.For(t, 20*time.Second, "the GPU-idle host terminated and its node deregistered", func() (bool, string) {
		checkBusy()
		left := prov.utilsLeft()
		nodes, err := s.State().NodesByNodePool(nil, "gpu")
		if err != nil {
			t.Fatal(err)
		}
		return len(left) == 1 && left[0] == 90 && len(nodes) == 1, fmt.Sprintf("hosts (idle utilisation) %v, nodes %d", left, len(nodes))
	})
	// The busy node stays through several more rounds: longer than its
	// rule's window and idle_after, at 50 ms a round.
	deadline := time.Now().Add(2 * (rule.GPUUtilFor + 200*time.Millisecond))
	for time.Now().Before(deadline) {
		checkBusy()
		time.Sleep(50 * time.Millisecond)
	}
	if left := prov.utilsLeft(); len(left) != 1 || left[0] != 90 {
		t.Fatalf("hosts left %v, want the 90 %% one", left)
	}
}

func mustNodes(t *testing.T, s *server.Server) []*structs.Node {
	t.Helper()
	nodes, err := s.State().NodesByNodePool(nil, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}
