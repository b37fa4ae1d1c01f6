package state

import (
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// watchNode returns the node's client watch index for a client at
// minIndex and a function that reports whether the watch fired since.
func watchNode(t *testing.T, s *StateStore, nodeID string, minIndex uint64) (uint64, func() bool) {
	t.Helper()
	ws := memdb.NewWatchSet()
	idx, err := s.NodeClientAllocsIndex(ws, nodeID, minIndex)
	if err != nil {
		t.Fatal(err)
	}
	return idx, func() bool {
		for ch := range ws {
			select {
			case <-ch:
				return true
			default:
			}
		}
		return false
	}
}

// TestNodeClientAllocsIndex checks the per-node index of server-side
// allocation changes: a placement, a stop and a removal move it and fire
// its watch; the client's own status report and a deployment health
// verdict do neither; another node's changes do not touch it; a node
// deleted with no allocation left loses its row (without the index going
// back for a client that saw it); a restore rebuilds it.
func TestNodeClientAllocsIndex(t *testing.T) {
	s := testStore(t)
	job := statetest.BatchJob(0)
	node, other := statetest.Node(0), statetest.Node(0)
	must(t, s.UpsertJob(1, job))
	must(t, s.UpsertNode(2, node))
	must(t, s.UpsertNode(3, other))

	if idx, _ := watchNode(t, s, node.ID, 0); idx != 1 {
		t.Fatalf("index of a node without allocations = %d, want 1", idx)
	}
	_, fired := watchNode(t, s, node.ID, 0)
	a := statetest.Alloc(job, node)
	must(t, s.UpsertPlanResults(10, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}, UpdatedAt: 1}))
	if !fired() {
		t.Fatal("a placement did not fire the node's watch")
	}
	idx, fired := watchNode(t, s, node.ID, 10)
	if idx != 10 {
		t.Fatalf("index after placement = %d, want 10", idx)
	}
	_, otherFired := watchNode(t, s, other.ID, 1)

	// The client's own report and a health verdict: no wake, same index.
	must(t, s.UpdateAllocsFromClient(11, []*structs.Allocation{{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning}}, 2))
	if fired() {
		t.Fatal("the client's own status report fired its watch")
	}
	if idx, _ := watchNode(t, s, node.ID, 10); idx != 10 {
		t.Fatalf("index after a client report = %d, want 10", idx)
	}

	// A stop moves it.
	must(t, s.UpsertPlanResults(12, &structs.ApplyPlanResultsRequest{AllocsStopped: []*structs.Allocation{{ID: a.ID}}, UpdatedAt: 3}))
	if !fired() {
		t.Fatal("a stop did not fire the node's watch")
	}
	idx, fired = watchNode(t, s, node.ID, 12)
	if idx != 12 {
		t.Fatalf("index after stop = %d, want 12", idx)
	}
	if otherFired() {
		t.Fatal("another node's changes fired this node's watch")
	}

	// A removal moves it.
	must(t, s.DeleteEvals(13, nil, []string{a.ID}))
	if !fired() {
		t.Fatal("a removal did not fire the node's watch")
	}
	if idx, _ := watchNode(t, s, node.ID, 12); idx != 13 {
		t.Fatalf("index after removal = %d, want 13", idx)
	}

	// The node goes with no allocation left: its row goes, and a client
	// that saw 13 keeps 13 (no wake, no index going back).
	must(t, s.DeleteNode(14, node.ID))
	if _, err := s.db.Txn(false).First(TableNodeAllocChanges, "id", node.ID); err != nil {
		t.Fatal(err)
	}
	if raw, _ := s.db.Txn(false).First(TableNodeAllocChanges, "id", node.ID); raw != nil {
		t.Fatalf("row of a deleted node without allocations kept: %+v", raw)
	}
	if idx, _ := watchNode(t, s, node.ID, 13); idx != 13 {
		t.Fatalf("index of a removed node for a client at 13 = %d, want 13", idx)
	}

	// A restore rebuilds the rows at the restored allocs index.
	b := statetest.Alloc(job, other)
	must(t, s.UpsertPlanResults(20, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{b}, UpdatedAt: 4}))
	must(t, s.UpdateAllocsFromClient(21, []*structs.Allocation{{ID: b.ID, ClientStatus: structs.AllocClientStatusRunning}}, 5))
	dst := testStore(t)
	r, err := dst.Restore()
	if err != nil {
		t.Fatal(err)
	}
	must(t, r.NodeRestore(other))
	must(t, r.AllocRestore(mustAlloc(t, s, b.ID)))
	must(t, r.IndexRestore(TableAllocs, 21))
	must(t, r.Commit())
	if idx, _ := watchNode(t, dst, other.ID, 20); idx != 21 {
		t.Fatalf("index after restore = %d, want 21 (the restored allocs index)", idx)
	}
}
