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
