package state

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestNodePoolCountBounded proves the pools table cannot grow without
// limit: neither through pool upserts (64 a request, any number of
// requests) nor through nodes registering, or one node re-registering,
// with a new pool name each time (each would create a pool). At
// structs.MaxNodePools a new pool is refused naming the bound; an existing
// pool can still be written and joined.
func TestNodePoolCountBounded(t *testing.T) {
	s := testStore(t)
	index := uint64(10)
	for i := 0; i < structs.MaxNodePools; i += structs.MaxNodePoolsPerRequest {
		batch := make([]*structs.NodePool, 0, structs.MaxNodePoolsPerRequest)
		for j := i; j < i+structs.MaxNodePoolsPerRequest && j < structs.MaxNodePools; j++ {
			batch = append(batch, &structs.NodePool{Name: fmt.Sprintf("p%d", j)})
		}
		index++
		if err := s.UpsertNodePools(index, batch); err != nil {
			t.Fatalf("upsert pools %d..: %v", i, err)
		}
	}
	// "default" may still be written: it is built-in and not counted.
	index++
	if err := s.UpsertNodePools(index, []*structs.NodePool{{Name: "default", Description: "d"}, {Name: "p0", Description: "again"}}); err != nil {
		t.Fatalf("rewrite existing pools at the bound: %v", err)
	}
	index++
	err := s.UpsertNodePools(index, []*structs.NodePool{{Name: "one-more"}})
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprint(structs.MaxNodePools)) {
		t.Fatalf("pool past the bound: %v", err)
	}
	n := statetest.Node(0)
	n.NodePool = "made-by-a-node"
	index++
	if err := s.UpsertNodePools(index, nil); err != nil {
		t.Fatal(err)
	}
	index++
	if err := s.UpsertNode(index, n); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "made-by-a-node") {
		t.Fatalf("node creating a pool past the bound: %v", err)
	}
	if got, _ := s.NodeByID(nil, n.ID); got != nil {
		t.Fatalf("refused node was stored: %+v", got)
	}
	n.NodePool = "p7"
	index++
	if err := s.UpsertNode(index, n); err != nil {
		t.Fatalf("node joining an existing pool at the bound: %v", err)
	}
	pools, err := s.NodePools(nil)
	if err != nil || len(pools) != structs.MaxNodePools+2 { // + default, all
		t.Fatalf("pools = %d, %v", len(pools), err)
	}
}

// TestDeletePoolWithProvisionedHostsRefused proves a pool cannot be
// deleted while the provisioner is making a host for it or one of its
// hosts lives: the pool would leave the provisioner's view (so the host
// is never scaled in nor reconciled as an orphan), and the host's agent,
// joining later, would re-create the pool without a scaling policy; the
// host would run, unmanaged, for ever.
func TestDeletePoolWithProvisionedHostsRefused(t *testing.T) {
	s := testStore(t)
	if err := s.UpsertNodePools(1, []*structs.NodePool{testPool("gpu")}); err != nil {
		t.Fatal(err)
	}
	create := &structs.ProvisionRequest{ID: "r1", Pool: "gpu", Op: structs.ProvisionOpCreate, IdempotencyKey: "k1",
		NodeName: "gpu-1", Status: structs.ProvisionStatusPending, Reason: "test"}
	if err := s.UpsertProvisionRequests(2, []*structs.ProvisionRequest{create}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNodePools(3, []string{"gpu"}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "provision") {
		t.Fatalf("delete with a pending create: %v", err)
	}
	done := *create
	done.Status, done.HostID = structs.ProvisionStatusComplete, "h1"
	if err := s.UpsertProvisionRequests(4, []*structs.ProvisionRequest{&done}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNodePools(5, []string{"gpu"}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "h1") {
		t.Fatalf("delete with a live host: %v", err)
	}
	term := &structs.ProvisionRequest{ID: "r2", Pool: "gpu", Op: structs.ProvisionOpTerminate, HostID: "h1",
		Status: structs.ProvisionStatusComplete, Reason: "idle"}
	if err := s.UpsertProvisionRequests(6, []*structs.ProvisionRequest{term}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNodePools(7, []string{"gpu"}); err != nil {
		t.Fatalf("delete once the host is terminated: %v", err)
	}
}

// TestPoolProviderSwapWithLiveHostsRefused proves a pool's scaling policy
// cannot be removed, nor its provider changed, while one of its hosts
// lives: the hosts the old provider made would never be terminated (the
// new one does not know them; a pool without a policy is not scaled).
func TestPoolProviderSwapWithLiveHostsRefused(t *testing.T) {
	s := testStore(t)
	if err := s.UpsertNodePools(1, []*structs.NodePool{testPool("gpu")}); err != nil {
		t.Fatal(err)
	}
	live := &structs.ProvisionRequest{ID: "r1", Pool: "gpu", Op: structs.ProvisionOpCreate, IdempotencyKey: "k1",
		NodeName: "gpu-1", HostID: "h1", Status: structs.ProvisionStatusComplete, Reason: "test"}
	if err := s.UpsertProvisionRequests(2, []*structs.ProvisionRequest{live}); err != nil {
		t.Fatal(err)
	}
	noPolicy := testPool("gpu")
	noPolicy.Scaling = nil
	otherProvider := testPool("gpu")
	otherProvider.Scaling.Provider = structs.PoolProviderExec
	otherProvider.Scaling.ProviderConfig = map[string]string{"command": "/opt/x"}
	for name, p := range map[string]*structs.NodePool{"policy removed": noPolicy, "provider changed": otherProvider} {
		if err := s.UpsertNodePools(3, []*structs.NodePool{p}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "h1") {
			t.Fatalf("%s with a live host: %v", name, err)
		}
	}
	// Other changes (bounds, shape, description) are fine.
	grown := testPool("gpu")
	grown.Scaling.Max, grown.Description = 8, "more"
	if err := s.UpsertNodePools(4, []*structs.NodePool{grown}); err != nil {
		t.Fatalf("max raised: %v", err)
	}
}
