package state

import (
	"fmt"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// Node pools (Nomad's node_pool). The built-in pools "default" and "all"
// exist without being written: reads add them when the table has no row
// for them. "default" may be written (its description and meta); "all"
// may not, and no node may be in it. Neither can be deleted.

// UpsertNodePools creates or replaces pools at Raft index index, all in one
// transaction: a stored pool keeps its CreateIndex; an unchanged one is not
// written again. Errors wrap structs.ErrInvalid for a nil pool, one that
// fails Validate, a name given twice, "all", past structs.MaxNodePools, or
// one whose scaling policy is removed or whose provider changes while one
// of its hosts lives or is being made; then nothing is written.
func (s *StateStore) UpsertNodePools(index uint64, pools []*structs.NodePool) error {
	seen := make(map[string]bool, len(pools))
	for _, p := range pools {
		if err := checkWritablePool(p); err != nil {
			return err
		}
		if seen[p.Name] {
			return invalid("node pool %q: given twice", p.Name)
		}
		seen[p.Name] = true
	}
	txn := s.writeTxn()
	defer txn.Abort()
	if err := checkPoolRoomTxn(txn, pools); err != nil {
		return err
	}
	touched := false
	for _, p := range pools {
		existing, err := nodePoolRowTxn(txn, nil, p.Name)
		if err != nil {
			return err
		}
		if existing != nil && existing.Scaling != nil && (p.Scaling == nil || p.Scaling.Provider != existing.Scaling.Provider) {
			// The old provider's hosts would never be terminated.
			if err := poolUnprovisionedTxn(txn, p.Name, "remove its scaling policy or change its provider"); err != nil {
				return err
			}
		}
		c := p.Copy()
		c.CreateIndex, c.ModifyIndex = index, index
		if existing != nil {
			c.CreateIndex, c.ModifyIndex = existing.CreateIndex, existing.ModifyIndex
			if existing.Equal(c) {
				continue
			}
			c.ModifyIndex = index
		}
		if err := txn.Insert(TableNodePools, c); err != nil {
			return fmt.Errorf("state: insert node pool %q: %w", c.Name, err)
		}
		touched = true
	}
	if touched {
		if err := setIndex(txn, TableNodePools, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// checkWritablePool refuses a pool that may not be written.
func checkWritablePool(p *structs.NodePool) error {
	if p == nil {
		return invalid("node pool: nil")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Name == structs.NodePoolAll {
		return invalid("node pool %q: built-in, cannot be modified", p.Name)
	}
	return nil
}

// DeleteNodePools removes the pools named, all or none. Errors wrap
// structs.ErrInvalid for a built-in pool or one that a node or a live job
// (status not dead) is in, and structs.ErrNotFound for an unknown pool;
// then nothing is removed.
func (s *StateStore) DeleteNodePools(index uint64, names []string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	for _, name := range names {
		if structs.IsBuiltinNodePool(name) {
			return invalid("node pool %q: built-in, cannot be deleted", name)
		}
		p, err := nodePoolRowTxn(txn, nil, name)
		if err != nil {
			return err
		}
		if p == nil {
			return notFound("node pool", name)
		}
		if err := poolUnusedTxn(txn, name); err != nil {
			return err
		}
		if err := txn.Delete(TableNodePools, p); err != nil {
			return fmt.Errorf("state: delete node pool %q: %w", name, err)
		}
	}
	if len(names) > 0 {
		if err := setIndex(txn, TableNodePools, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// poolUnusedTxn returns an ErrInvalid error when a node or a live job is
// in the (non-default) pool name.
func poolUnusedTxn(txn *memdb.Txn, name string) error {
	nodes, err := getAll[structs.Node](txn, nil, TableNodes, "node_pool", name)
	if err != nil {
		return err
	}
	if len(nodes) > 0 {
		// Say what to do: a down node (a terminated host's, say) leaves
		// only with the node GC; a live one with its agent or a drain.
		down := 0
		for _, n := range nodes {
			if n.Status == structs.NodeStatusDown {
				down++
			}
		}
		hint := "stop their agents or move them to another pool (client node_pool) first"
		if down == len(nodes) {
			hint = "all are down: `gpulayer system gc` removes down nodes, then delete again"
		}
		return invalid("node pool %q: %d node(s) are in it (first %q); cannot delete: %s", name, len(nodes), nodes[0].ID, hint)
	}
	jobs, err := jobsByNodePoolTxn(txn, nil, name)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Status != structs.JobStatusDead {
			return invalid("node pool %q: job %q (status %s) is in it; cannot delete", name, j.ID, j.Status)
		}
	}
	return poolUnprovisionedTxn(txn, name, "delete it")
}

// poolUnprovisionedTxn returns an ErrInvalid error when the provisioner
// is making a host for pool name or one of its hosts lives: deleting the
// pool would take it out of the provisioner's view (never scaled in nor
// reconciled), and the host's agent would re-create it, without a
// scaling policy, when it joins.
func poolUnprovisionedTxn(txn *memdb.Txn, name, action string) error {
	reqs, err := getAll[structs.ProvisionRequest](txn, nil, TableProvisionRequests, "pool", name)
	if err != nil {
		return err
	}
	terminated := map[string]bool{}
	for _, r := range reqs {
		if r.Op == structs.ProvisionOpTerminate && r.Status == structs.ProvisionStatusComplete {
			terminated[r.HostID] = true
		}
	}
	for _, r := range reqs {
		switch {
		case !r.Finished():
			return invalid("node pool %q: provision request %q (%s, %s) is not finished; set the pool's min to 0 and let its hosts fall idle (drain them) so the provisioner terminates them, then %s",
				name, r.ID, r.Op, r.Status, action)
		case r.Op == structs.ProvisionOpCreate && r.Status == structs.ProvisionStatusComplete && r.HostID != "" && !terminated[r.HostID]:
			return invalid("node pool %q: provisioned host %q (node %q) is not terminated; set the pool's min to 0 and let its hosts fall idle (drain them) so the provisioner terminates them, then %s",
				name, r.HostID, r.NodeName, action)
		}
	}
	return nil
}

// NodePools returns every pool, the built-ins included, sorted by name.
func (s *StateStore) NodePools(ws memdb.WatchSet) ([]*structs.NodePool, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	rows, err := getAll[structs.NodePool](txn, ws, TableNodePools, "id")
	if err != nil {
		return nil, err
	}
	have := make(map[string]bool, len(rows))
	for _, p := range rows {
		have[p.Name] = true
	}
	for _, b := range []string{structs.NodePoolAll, structs.NodePoolDefault} {
		if !have[b] {
			rows = append(rows, structs.BuiltinNodePool(b))
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

// NodePoolByName returns the pool (a built-in one even when unwritten),
// or nil and no error when there is none.
func (s *StateStore) NodePoolByName(ws memdb.WatchSet, name string) (*structs.NodePool, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	p, err := nodePoolRowTxn(txn, ws, name)
	if err != nil || p != nil {
		return p, err
	}
	return structs.BuiltinNodePool(name), nil
}

// NodePoolRows returns the written pools only, sorted by name (a
// snapshot's records).
func (s *StateStore) NodePoolRows(ws memdb.WatchSet) ([]*structs.NodePool, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.NodePool](txn, ws, TableNodePools, "id")
}

func nodePoolRowTxn(txn *memdb.Txn, ws memdb.WatchSet, name string) (*structs.NodePool, error) {
	return firstByID[structs.NodePool](txn, ws, TableNodePools, "node pool", name)
}

// NodesByNodePool returns the nodes in pool, sorted by ID: for "default"
// also the nodes whose NodePool is empty; for "all" every node.
func (s *StateStore) NodesByNodePool(ws memdb.WatchSet, pool string) ([]*structs.Node, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	switch pool {
	case structs.NodePoolAll:
		return getAll[structs.Node](txn, ws, TableNodes, "id")
	case structs.NodePoolDefault:
		all, err := getAll[structs.Node](txn, ws, TableNodes, "id")
		if err != nil {
			return nil, err
		}
		var out []*structs.Node
		for _, n := range all {
			if structs.NodePoolOrDefault(n.NodePool) == structs.NodePoolDefault {
				out = append(out, n)
			}
		}
		return out, nil
	}
	return getAll[structs.Node](txn, ws, TableNodes, "node_pool", pool)
}

// JobsByNodePool returns the jobs whose NodePool is pool, sorted by ID:
// for "default" also the jobs whose NodePool is empty. "all" names the
// jobs that asked for every node, not every job.
func (s *StateStore) JobsByNodePool(ws memdb.WatchSet, pool string) ([]*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return jobsByNodePoolTxn(txn, ws, pool)
}

func jobsByNodePoolTxn(txn *memdb.Txn, ws memdb.WatchSet, pool string) ([]*structs.Job, error) {
	all, err := getAll[structs.Job](txn, ws, TableJobs, "id")
	if err != nil {
		return nil, err
	}
	var out []*structs.Job
	for _, j := range all {
		if structs.NodePoolOrDefault(j.NodePool) == pool {
			out = append(out, j)
		}
	}
	return out, nil
}

// ensureNodePoolTxn creates pool name at index when a node registers into
// a pool that has no row and is not built-in, as Nomad does: a client's
// node_pool names its pool into existence.
func ensureNodePoolTxn(txn *memdb.Txn, index uint64, name string) error {
	if name == "" || structs.IsBuiltinNodePool(name) {
		return nil
	}
	p, err := nodePoolRowTxn(txn, nil, name)
	if err != nil || p != nil {
		return err
	}
	n, err := countPoolRowsTxn(txn)
	if err != nil {
		return err
	}
	if n >= structs.MaxNodePools {
		return invalid("node pool %q: the cluster has %d node pools, at most %d; a node cannot create another", name, n, structs.MaxNodePools)
	}
	if err := txn.Insert(TableNodePools, &structs.NodePool{Name: name, CreateIndex: index, ModifyIndex: index}); err != nil {
		return fmt.Errorf("state: insert node pool %q: %w", name, err)
	}
	return setIndex(txn, TableNodePools, index)
}

// countPoolRowsTxn counts the written pools, the built-ins not counted.
func countPoolRowsTxn(txn *memdb.Txn) (int, error) {
	it, err := txn.Get(TableNodePools, "id")
	if err != nil {
		return 0, fmt.Errorf("state: list node pools: %w", err)
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if !structs.IsBuiltinNodePool(raw.(*structs.NodePool).Name) {
			n++
		}
	}
	return n, nil
}

// checkPoolRoomTxn refuses an upsert that would take the cluster past
// structs.MaxNodePools (rewriting existing pools always fits).
func checkPoolRoomTxn(txn *memdb.Txn, pools []*structs.NodePool) error {
	added := 0
	for _, p := range pools {
		if structs.IsBuiltinNodePool(p.Name) {
			continue
		}
		existing, err := nodePoolRowTxn(txn, nil, p.Name)
		if err != nil {
			return err
		}
		if existing == nil {
			added++
		}
	}
	if added == 0 {
		return nil
	}
	n, err := countPoolRowsTxn(txn)
	if err != nil {
		return err
	}
	if n+added > structs.MaxNodePools {
		return invalid("node pools: the cluster has %d node pools and this adds %d; at most %d", n, added, structs.MaxNodePools)
	}
	return nil
}

// checkNodePool refuses a node whose NodePool is malformed or "all".
func checkNodePool(n *structs.Node) error {
	if n.NodePool == "" {
		return nil
	}
	if n.NodePool == structs.NodePoolAll {
		return invalid("node %q: node pool %q cannot have nodes", n.ID, n.NodePool)
	}
	if !structs.ValidNodePoolName(n.NodePool) {
		return invalid("node %q: node pool name %.128q (%d bytes): must be 1 to %d letters, digits, '-' or '_'", n.ID, n.NodePool, len(n.NodePool), structs.MaxNodePoolNameLen)
	}
	return nil
}

// NodePoolRestore inserts a pool from a snapshot. Errors wrap
// structs.ErrInvalid for a nil pool or one without a name.
func (r *StateRestore) NodePoolRestore(p *structs.NodePool) error {
	if p == nil || p.Name == "" {
		return invalid("restore node pool: nil or without name")
	}
	return r.insert(TableNodePools, p.Name, p)
}
