package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// joiningProvider is an in-test provider whose hosts join at once: Create
// registers a node of the pool's shape under the requested name.
type joiningProvider struct {
	mu      sync.Mutex
	srv     *server.Server
	hosts   map[string]provision.Host
	creates int
	terms   int
}

func (p *joiningProvider) Name() string { return "joining" }

func (p *joiningProvider) Create(ctx context.Context, req provision.CreateRequest) (provision.Host, error) {
	p.mu.Lock()
	p.creates++
	for _, h := range p.hosts {
		if h.IdempotencyKey == req.IdempotencyKey {
			p.mu.Unlock()
			return h, nil
		}
	}
	srv := p.srv
	p.mu.Unlock()
	n := statetest.Node(max(req.Shape.GPUCount, 1))
	n.Name, n.NodePool = req.NodeName, req.Pool
	if _, err := srv.NodeRegister(ctx, n); err != nil {
		return provision.Host{}, err
	}
	h := provision.Host{ID: "h-" + n.ID[:8], Pool: req.Pool, IdempotencyKey: req.IdempotencyKey, NodeName: req.NodeName, State: "running"}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hosts[h.ID] = h
	return h, nil
}

func (p *joiningProvider) Terminate(ctx context.Context, pool, hostID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.terms++
	delete(p.hosts, hostID)
	return nil
}

func (p *joiningProvider) List(ctx context.Context, pool string) ([]provision.Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []provision.Host
	for _, h := range p.hosts {
		out = append(out, h)
	}
	return out, nil
}

func (p *joiningProvider) counts() (hosts, creates, terms int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hosts), p.creates, p.terms
}

// TestProvisionerGrowsAndShrinksPool runs the leader's provisioner in a
// real server: four one-GPU batch jobs queue in an empty pool (min 0),
// four hosts are made and join, the jobs are placed on them and finish,
// and once idle for idle_after the hosts are drained and terminated.
func TestProvisionerGrowsAndShrinksPool(t *testing.T) {
	prov := &joiningProvider{hosts: map[string]provision.Host{}}
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.Provision.Providers = func(*structs.NodePool) (provision.Provider, error) { return prov, nil }
		c.Provision.Interval = 50 * time.Millisecond
	}))
	prov.mu.Lock()
	prov.srv = s
	prov.mu.Unlock()
	ctx := ctxT(t)
	pool := &structs.NodePool{Name: "gpu", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Min: 0, Max: 4,
		Shape: structs.NodeShape{GPUCount: 1}, IdleAfter: 300 * time.Millisecond, Idle: structs.PoolIdleRule{NoAllocations: true}}}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{pool}); err != nil {
		t.Fatal(err)
	}
	var jobs []*structs.Job
	for i := 0; i < 4; i++ {
		j := statetest.BatchJob(1)
		j.NodePool = "gpu"
		if _, err := s.JobRegister(ctx, j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	var allocs []*structs.Allocation
	waittest.Until(t, 20*time.Second, "4 jobs placed on provisioned nodes", func() bool {
		allocs = allocs[:0]
		for _, j := range jobs {
			as, err := s.State().AllocsByJob(nil, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			allocs = append(allocs, as...)
		}
		return len(allocs) == 4
	})
	if hosts, creates, _ := prov.counts(); hosts != 4 || creates != 4 {
		t.Fatalf("hosts %d creates %d, want 4 and 4", hosts, creates)
	}
	st, _, err := s.NodePoolStatus(ctx, "gpu", &structs.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Hosts != 4 || len(st.Decisions) == 0 {
		t.Fatalf("status = %+v", st)
	}
	t.Logf("decision: %s", st.Decisions[len(st.Decisions)-1].Reason)
	// The jobs run and finish.
	for _, a := range allocs {
		u := &structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: structs.AllocClientStatusComplete}
		if err := s.UpdateAllocs(ctx, []*structs.Allocation{u}); err != nil {
			t.Fatal(err)
		}
	}
	waittest.For(t, 30*time.Second, "idle hosts terminated", func() (bool, string) {
		hosts, creates, terms := prov.counts()
		return hosts == 0, fmt.Sprintf("hosts %d creates %d terminates %d", hosts, creates, terms)
	})
	if _, creates, _ := prov.counts(); creates != 4 {
		t.Fatalf("creates = %d, want 4 (none doubled)", creates)
	}
	// The terminated hosts' nodes are deregistered, not left to go down
	// by heartbeat: `node status` shows no dead provisioned node.
	waittest.For(t, 10*time.Second, "terminated hosts' nodes deregistered", func() (bool, string) {
		nodes, err := s.State().NodesByNodePool(nil, "gpu")
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, n := range nodes {
			left = append(left, n.Name+"="+n.Status)
		}
		return len(nodes) == 0, fmt.Sprintf("nodes left: %v", left)
	})
	for _, a := range allocs {
		got, err := s.State().AllocByID(nil, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.ClientStatus != structs.AllocClientStatusComplete {
			t.Fatalf("alloc %s after deregistration: %+v, want kept complete", a.ID, got)
		}
	}
}
