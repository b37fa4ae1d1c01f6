package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// TableNodeAllocChanges holds one *NodeAllocChange per node, and per
// node gone whose allocations are not all removed yet: the Raft index of the last server-side change to that node's
// allocations. A server-side change is one that moves an allocation's
// AllocModifyIndex (a placement or a stop, UpsertPlanResults) or removes
// an allocation (DeleteEvalsAllocs, GC); a client's own status report
// (UpdateAllocsFromClient) and a deployment health verdict
// (SetAllocDeploymentHealth) are not. The client's allocation watch
// (NodeClientAllocsIndex) watches only its node's row, so a node's own
// status reports do not wake its long poll on the servers.
//
// The table is derived: it is not in snapshots (a restore rebuilds it,
// StateRestore.Commit) nor in the state hash, and it publishes no events.
const TableNodeAllocChanges = "node_alloc_changes"

// NodeAllocChange is a row of TableNodeAllocChanges.
type NodeAllocChange struct {
	NodeID string
	Index  uint64
}

func nodeAllocChangesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableNodeAllocChanges,
		Indexes: map[string]*memdb.IndexSchema{"id": {
			Name:    "id",
			Unique:  true,
			Indexer: &memdb.StringFieldIndex{Field: "NodeID"},
		}},
	}
}

// ensureNodeAllocChangeTxn gives a node its row (index 1, no change yet)
// when it has none: a watch on a missing row is a watch on its neighbours
// in the radix tree, which every other node's change would wake.
func ensureNodeAllocChangeTxn(txn *memdb.Txn, nodeID string) error {
	raw, err := txn.First(TableNodeAllocChanges, "id", nodeID)
	if err != nil {
		return fmt.Errorf("state: node %q allocation change: %w", nodeID, err)
	}
	if raw != nil {
		return nil
	}
	if err := txn.Insert(TableNodeAllocChanges, &NodeAllocChange{NodeID: nodeID, Index: 1}); err != nil {
		return fmt.Errorf("state: node %q allocation change: %w", nodeID, err)
	}
	return nil
}

// nodeAllocsChangedTxn records a server-side change at index to the
// allocations of each node in nodes. A node whose row would only keep
// garbage (the node is gone and has no allocation left) loses its row
// instead: a client of it that still asks sees no change (see
// NodeClientAllocsIndex), and the table does not grow with every node a
// cluster ever had.
func nodeAllocsChangedTxn(txn *memdb.Txn, index uint64, nodes map[string]bool) error {
	for id := range nodes {
		if id == "" {
			continue
		}
		if err := nodeAllocChangeTxn(txn, index, id); err != nil {
			return err
		}
	}
	return nil
}

func nodeAllocChangeTxn(txn *memdb.Txn, index uint64, nodeID string) error {
	keep := true
	node, err := txn.First(TableNodes, "id", nodeID)
	if err != nil {
		return fmt.Errorf("state: node %q lookup: %w", nodeID, err)
	}
	if node == nil {
		a, err := txn.First(TableAllocs, "node", nodeID)
		if err != nil {
			return fmt.Errorf("state: allocations of node %q: %w", nodeID, err)
		}
		keep = a != nil
	}
	if keep {
		if err := txn.Insert(TableNodeAllocChanges, &NodeAllocChange{NodeID: nodeID, Index: index}); err != nil {
			return fmt.Errorf("state: node %q allocation change: %w", nodeID, err)
		}
		return nil
	}
	if _, err := txn.DeleteAll(TableNodeAllocChanges, "id", nodeID); err != nil {
		return fmt.Errorf("state: node %q allocation change: %w", nodeID, err)
	}
	return nil
}

// NodeClientAllocsIndex returns the index of the node's allocation watch
// for a client that has seen minIndex, and adds to ws only the channel of
// the node's row in TableNodeAllocChanges, so only a server-side change to
// the node's allocations (or a restore) wakes it. The index is the row's,
// not below minIndex unless the allocs table's index is (a restored, older
// state, which the client must see as the index going back), at least 1.
func (s *StateStore) NodeClientAllocsIndex(ws memdb.WatchSet, nodeID string, minIndex uint64) (uint64, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	watchCh, raw, err := txn.FirstWatch(TableNodeAllocChanges, "id", nodeID)
	if err != nil {
		return 0, fmt.Errorf("state: node %q allocation change: %w", nodeID, err)
	}
	ws.Add(watchCh)
	var row uint64
	if raw != nil {
		row = raw.(*NodeAllocChange).Index
	}
	table, err := indexTxn(txn, TableAllocs)
	if err != nil {
		return 0, err
	}
	return max(row, min(minIndex, table), 1), nil
}

// rebuildNodeAllocChanges fills TableNodeAllocChanges after a restore:
// every node gets a row; one with allocations gets the restored allocs table's index (or,
// without one, its allocations' highest AllocModifyIndex), so each
// client's watch wakes once on the restored state rather than miss a
// removal the snapshot folded in.
func rebuildNodeAllocChanges(txn *memdb.Txn) error {
	table, err := indexTxn(txn, TableAllocs)
	if err != nil {
		return err
	}
	rows := map[string]uint64{}
	it, err := txn.Get(TableAllocs, "id")
	if err != nil {
		return fmt.Errorf("state: list allocations: %w", err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		a := raw.(*structs.Allocation)
		if a.NodeID == "" {
			continue
		}
		rows[a.NodeID] = max(rows[a.NodeID], table, a.AllocModifyIndex)
	}
	nit, err := txn.Get(TableNodes, "id")
	if err != nil {
		return fmt.Errorf("state: list nodes: %w", err)
	}
	for raw := nit.Next(); raw != nil; raw = nit.Next() {
		n := raw.(*structs.Node)
		rows[n.ID] = max(rows[n.ID], 1)
	}
	for id, idx := range rows {
		if err := txn.Insert(TableNodeAllocChanges, &NodeAllocChange{NodeID: id, Index: idx}); err != nil {
			return fmt.Errorf("state: node %q allocation change: %w", id, err)
		}
	}
	return nil
}
