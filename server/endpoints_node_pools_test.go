package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func gpuPool(name string) *structs.NodePool {
	return &structs.NodePool{Name: name, Description: "a100 hosts",
		Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 4, ProviderConfig: map[string]string{"memory_mb": "512"},
			Shape: structs.NodeShape{NodeClass: "a100", GPUCount: 1}, IdleAfter: 2 * time.Minute, Idle: structs.PoolIdleRule{NoAllocations: true}}}
}

// TestNodePoolEndpoints: upsert, list (built-ins and prefix), get, nodes
// and jobs of a pool, and delete, refused while a node or a live job is in
// the pool.
func TestNodePoolEndpoints(t *testing.T) {
	s := servertest.NewServer(t)
	ctx := ctxT(t)
	index, err := s.UpsertNodePools(ctx, []*structs.NodePool{gpuPool("gpu"), gpuPool("gpu-b")})
	if err != nil || index == 0 {
		t.Fatalf("upsert: %d, %v", index, err)
	}
	pools, meta, err := s.NodePools(ctx, nil)
	if err != nil || len(pools) != 4 || meta.Index != index {
		t.Fatalf("list: %d pools, index %d (want %d), %v", len(pools), meta.Index, index, err)
	}
	pools, _, _ = s.NodePools(ctx, &structs.QueryOptions{Prefix: "gpu-"})
	if len(pools) != 1 || pools[0].Name != "gpu-b" {
		t.Fatalf("prefix list = %+v", pools)
	}
	p, _, err := s.NodePoolGet(ctx, "gpu", nil)
	if err != nil || p.Scaling == nil || p.Scaling.Shape.NodeClass != "a100" || p.CreateIndex != index {
		t.Fatalf("get = %+v, %v", p, err)
	}
	if _, _, err := s.NodePoolGet(ctx, "nope", nil); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, _, err := s.NodePoolNodes(ctx, "nope", nil); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("nodes of unknown: %v", err)
	}

	n := statetest.Node(1)
	n.NodePool = "gpu"
	if _, err := s.NodeRegister(ctx, n); err != nil {
		t.Fatal(err)
	}
	plain := statetest.Node(0)
	if _, err := s.NodeRegister(ctx, plain); err != nil {
		t.Fatal(err)
	}
	nodes, _, err := s.NodePoolNodes(ctx, "gpu", nil)
	if err != nil || len(nodes) != 1 || nodes[0].ID != n.ID || nodes[0].SecretID != "" {
		t.Fatalf("nodes of gpu = %+v, %v", nodes, err)
	}
	nodes, _, _ = s.NodePoolNodes(ctx, "default", nil)
	if len(nodes) != 1 || nodes[0].ID != plain.ID || nodes[0].NodePool != "default" {
		t.Fatalf("nodes of default = %+v", nodes)
	}
	if _, err := s.DeleteNodePool(ctx, "gpu"); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "node(s) are in it") {
		t.Fatalf("delete with a node: %v", err)
	}
	job := statetest.BatchJob(0)
	job.NodePool = "gpu-b"
	if _, err := s.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := s.NodePoolJobs(ctx, "gpu-b", nil)
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("jobs of gpu-b = %+v, %v", jobs, err)
	}
	if _, err := s.DeleteNodePool(ctx, "gpu-b"); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), job.ID) {
		t.Fatalf("delete with a live job: %v", err)
	}
	if _, err := s.JobDeregister(ctx, job.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteNodePool(ctx, "gpu-b"); err != nil {
		t.Fatalf("delete unused: %v", err)
	}
	if _, _, err := s.NodePoolGet(ctx, "gpu-b", nil); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("deleted pool still there: %v", err)
	}
	if _, err := s.DeleteNodePool(ctx, "gpu-b"); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

// TestNodePoolRefusals: built-ins cannot be deleted, "all" cannot be
// modified nor have nodes, a job cannot name a pool that does not exist,
// and bad pools are refused before Raft.
func TestNodePoolRefusals(t *testing.T) {
	s := servertest.NewServer(t)
	ctx := ctxT(t)
	for _, name := range []string{"default", "all"} {
		if _, err := s.DeleteNodePool(ctx, name); !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("delete %q: %v", name, err)
		}
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{{Name: "all", Description: "x"}}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("modify all: %v", err)
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{{Name: "default", Description: "ours"}}); err != nil {
		t.Fatalf("modify default: %v", err)
	}
	bad := gpuPool("x")
	bad.Scaling.Shape.GPUCount = 17
	for name, pools := range map[string][]*structs.NodePool{
		"none": nil, "null": {nil}, "twice": {{Name: "a"}, {Name: "a"}}, "gpu_count": {bad},
	} {
		if _, err := s.UpsertNodePools(ctx, pools); !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	n := statetest.Node(0)
	n.NodePool = "all"
	if _, err := s.NodeRegister(ctx, n); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("node in all: %v", err)
	}
	job := statetest.BatchJob(0)
	job.NodePool = "missing"
	if _, err := s.JobRegister(ctx, job); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), `node pool "missing" does not exist`) {
		t.Fatalf("job in a missing pool: %v", err)
	}
	job.NodePool = "all"
	if _, err := s.JobRegister(ctx, job); err != nil {
		t.Fatalf("job in all: %v", err)
	}
}

// TestNodePoolsBlockingQuery: a list waiting on an index wakes when a pool
// is written.
func TestNodePoolsBlockingQuery(t *testing.T) {
	s := servertest.NewServer(t)
	ctx := ctxT(t)
	_, meta, err := s.NodePools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []*structs.NodePool, 1)
	go func() {
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		pools, _, _ := s.NodePools(qctx, &structs.QueryOptions{MinQueryIndex: meta.Index, MaxQueryTime: 20 * time.Second})
		done <- pools
	}()
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{{Name: "late"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case pools := <-done:
		if len(pools) != 3 {
			t.Fatalf("woken with %d pools", len(pools))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("blocking query did not wake")
	}
}

// TestNodeJoiningPoolPlacesBlockedJob: a job in a pool without nodes is
// blocked (while a node of another pool is free), and is placed once a
// node registers into its pool: the path a provisioned host takes.
func TestNodeJoiningPoolPlacesBlockedJob(t *testing.T) {
	s := servertest.NewServer(t)
	ctx := ctxT(t)
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{gpuPool("gpu")}); err != nil {
		t.Fatal(err)
	}
	registerNode(t, s, 1) // in default
	job := statetest.BatchJob(1)
	job.NodePool = "gpu"
	if _, err := s.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	waittest.NoErr(t, 10*time.Second, "a blocked evaluation naming the pools", func() (bool, error) {
		evals, _, err := s.JobEvaluations(ctx, job.ID, nil)
		for _, e := range evals {
			if m := e.FailedTGAllocs[job.TaskGroups[0].Name]; e.Status == structs.EvalStatusBlocked && m != nil &&
				m.ConstraintFiltered["node pool: node in pool default, job wants gpu"] == 1 {
				return true, err
			}
		}
		return false, err
	})
	n := statetest.Node(1)
	n.NodePool = "gpu"
	n.Status = structs.NodeStatusInit
	if _, err := s.NodeRegister(ctx, n); err != nil {
		t.Fatal(err)
	}
	allocs := runningAllocs(t, s, job.ID, 1)
	if allocs[0].NodeID != n.ID {
		t.Fatalf("placed on %s, want the gpu node %s", allocs[0].NodeID, n.ID)
	}
}

// TestNodePoolUpsertChecksProviderConfig: a provider config the provider
// would refuse at its first create (a misspelt docker key, an exec
// command that is not there) is refused by the upsert, naming the pool
// and the key, and nothing is stored.
func TestNodePoolUpsertChecksProviderConfig(t *testing.T) {
	s := servertest.NewServer(t)
	ctx := ctxT(t)
	typo := gpuPool("gpu")
	typo.Scaling.ProviderConfig = map[string]string{"memory": "512"}
	noCmd := gpuPool("gpu-exec")
	noCmd.Scaling.Provider = "exec"
	noCmd.Scaling.ProviderConfig = map[string]string{"command": "/nonexistent/provider.sh"}
	for _, c := range []struct {
		pool *structs.NodePool
		want []string
	}{
		{typo, []string{`node pool "gpu"`, `unknown key "memory"`, "memory_mb"}},
		{noCmd, []string{`node pool "gpu-exec"`, "command", "/nonexistent/provider.sh"}},
	} {
		_, err := s.UpsertNodePools(ctx, []*structs.NodePool{c.pool})
		if !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("%s: err = %v, want invalid", c.pool.Name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.pool.Name, err, w)
			}
		}
		if _, _, err := s.NodePoolGet(ctx, c.pool.Name, nil); !errors.Is(err, structs.ErrNotFound) {
			t.Errorf("%s stored after a refused upsert: %v", c.pool.Name, err)
		}
	}
}

// TestNodeRegisterHugePoolNameErrorBounded proves a node registering with
// a 10 KB pool name is refused with an error that does not echo the whole
// name back (into the response and the server's logs).
func TestNodeRegisterHugePoolNameErrorBounded(t *testing.T) {
	s := servertest.NewServer(t)
	n := statetest.Node(0)
	n.NodePool = strings.Repeat("p", 10<<10)
	_, err := s.NodeRegister(ctxT(t), n)
	if !errors.Is(err, structs.ErrInvalid) || len(err.Error()) > 1024 {
		t.Fatalf("node register with a 10 KB pool name: %d-byte error %.300v", len(fmt.Sprint(err)), err)
	}
	job := statetest.BatchJob(0)
	job.NodePool = strings.Repeat("j", 10<<10)
	if _, err := s.JobRegister(ctxT(t), job); !errors.Is(err, structs.ErrInvalid) || len(err.Error()) > 1024 {
		t.Fatalf("job with a 10 KB pool name: %d-byte error %.300v", len(fmt.Sprint(err)), err)
	}
}
