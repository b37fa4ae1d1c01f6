package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertNode registers or re-registers node at Raft index index. A
// re-registration keeps the stored CreateIndex and, when node leaves it
// empty, the stored SchedulingEligibility (new nodes default to eligible).
// It stores a copy of node. A node whose NodePool names a pool that has no
// row (and is not built-in) creates that pool, as in Nomad. Errors wrap
// structs.ErrInvalid for a nil node, an empty ID, or a NodePool that is
// malformed or "all".
func (s *StateStore) UpsertNode(index uint64, node *structs.Node) error {
	if node == nil || node.ID == "" {
		return invalid("node: nil or without ID")
	}
	if err := node.CheckWellFormed(); err != nil {
		return err
	}
	if err := checkNodePool(node); err != nil {
		return err
	}
	n, err := safeCopy("node", node.ID, node.Copy)
	if err != nil {
		return err
	}
	txn := s.writeTxn()
	defer txn.Abort()
	existing, err := nodeByIDTxn(txn, nil, node.ID)
	if err != nil {
		return err
	}
	n.CreateIndex = index
	if existing != nil {
		n.CreateIndex = existing.CreateIndex
		if n.SchedulingEligibility == "" {
			n.SchedulingEligibility = existing.SchedulingEligibility
		}
	}
	if n.SchedulingEligibility == "" {
		n.SchedulingEligibility = structs.NodeSchedulingEligible
	}
	n.ModifyIndex = index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("state: insert node %q: %w", n.ID, err)
	}
	if err := ensureNodeAllocChangeTxn(txn, n.ID); err != nil {
		return err
	}
	if err := setIndex(txn, TableNodes, index); err != nil {
		return err
	}
	if err := ensureNodePoolTxn(txn, index, n.NodePool); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// DeleteNode removes the node. Its allocations stay; the scheduler handles
// them. Errors wrap structs.ErrNotFound when the node does not exist.
func (s *StateStore) DeleteNode(index uint64, nodeID string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	existing, err := nodeByIDTxn(txn, nil, nodeID)
	if err != nil {
		return err
	}
	if existing == nil {
		return notFound("node", nodeID)
	}
	if err := txn.Delete(TableNodes, existing); err != nil {
		return fmt.Errorf("state: delete node %q: %w", nodeID, err)
	}
	if err := nodeAllocChangeTxn(txn, index, nodeID); err != nil {
		return err
	}
	if err := deleteServicesByTxn(txn, index, "node", nodeID); err != nil {
		return err
	}
	if err := setIndex(txn, TableNodes, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// UpdateNodeStatus sets the node's Status and StatusUpdatedAt (Unix
// seconds). Errors wrap structs.ErrNotFound when the node does not exist.
func (s *StateStore) UpdateNodeStatus(index uint64, nodeID, status string, updatedAt int64) error {
	txn := s.writeTxn()
	defer txn.Abort()
	existing, err := nodeByIDTxn(txn, nil, nodeID)
	if err != nil {
		return err
	}
	if existing == nil {
		return notFound("node", nodeID)
	}
	n, err := safeCopy("node", nodeID, existing.Copy)
	if err != nil {
		return err
	}
	n.Status = status
	n.StatusUpdatedAt = updatedAt
	// A node that is down serves nothing: its service instances go (as
	// Nomad does); its client registers them again when it is back.
	if status == structs.NodeStatusDown {
		if err := deleteServicesByTxn(txn, index, "node", nodeID); err != nil {
			return err
		}
	}
	n.ModifyIndex = index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("state: update node %q: %w", nodeID, err)
	}
	if err := setIndex(txn, TableNodes, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// Nodes returns every node, sorted by ID.
func (s *StateStore) Nodes(ws memdb.WatchSet) ([]*structs.Node, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Node](txn, ws, TableNodes, "id")
}

// NodeByID returns the node, or nil and no error when it does not exist.
func (s *StateStore) NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return nodeByIDTxn(txn, ws, id)
}

func nodeByIDTxn(txn *memdb.Txn, ws memdb.WatchSet, id string) (*structs.Node, error) {
	return firstByID[structs.Node](txn, ws, TableNodes, "node", id)
}
