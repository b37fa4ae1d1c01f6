package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// PromoteEndpointAlias points alias.Name (in alias.Namespace) at
// alias.Endpoint at Raft index index, in one transaction: the alias stops
// resolving to its former endpoint at the same index it starts resolving
// to the new one, so no reader sees it on two endpoints or on none. The
// promotion is checked again against the state it applies to (a racing
// job stop or placement may have changed it since the endpoint checked):
// the job alias.JobID must be live (not stopped) in the namespace and
// declare the endpoint, have at least one live member with a node, and no
// member may run on an opportunistic node. Errors wrap structs.ErrInvalid
// (a malformed alias, structs.ErrEndpointNotPlaced,
// structs.ErrEndpointOpportunistic) or structs.ErrNotFound (no such live
// job or endpoint); then nothing is written. A stored alias keeps its
// CreateIndex.
func (s *StateStore) PromoteEndpointAlias(index uint64, alias *structs.EndpointAlias) error {
	if err := alias.Validate(); err != nil {
		return err
	}
	txn := s.writeTxn()
	defer txn.Abort()
	if err := checkPromotableTxn(txn, alias); err != nil {
		return err
	}
	existing, err := endpointAliasTxn(txn, nil, alias.Namespace, alias.Name)
	if err != nil {
		return err
	}
	c := alias.Copy()
	c.CreateIndex, c.ModifyIndex = index, index
	if existing != nil {
		c.CreateIndex = existing.CreateIndex
	}
	if err := txn.Insert(TableEndpointAliases, c); err != nil {
		return fmt.Errorf("state: insert endpoint alias %q: %w", c.Name, err)
	}
	if err := setIndex(txn, TableEndpointAliases, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// CheckEndpointAliasPromotable runs PromoteEndpointAlias's checks on the
// current state without writing, so an endpoint can refuse a promotion
// before it costs a Raft entry. It returns the same errors.
func (s *StateStore) CheckEndpointAliasPromotable(alias *structs.EndpointAlias) error {
	if err := alias.Validate(); err != nil {
		return err
	}
	txn := s.db.Txn(false)
	defer txn.Abort()
	return checkPromotableTxn(txn, alias)
}

// checkPromotableTxn applies PromoteEndpointAlias's rules on the endpoint.
func checkPromotableTxn(txn *memdb.Txn, alias *structs.EndpointAlias) error {
	job, err := jobByIDTxn(txn, nil, alias.JobID)
	if err != nil {
		return err
	}
	if job == nil || job.Stop || job.Namespace != alias.Namespace {
		return fmt.Errorf("endpoint %q: job %q is not live in namespace %q: %w", alias.Endpoint, alias.JobID, alias.Namespace, structs.ErrNotFound)
	}
	tg := structs.FindEndpointGroup(job, alias.Endpoint)
	if tg == nil {
		return fmt.Errorf("endpoint %q: not declared by job %q: %w", alias.Endpoint, alias.JobID, structs.ErrNotFound)
	}
	allocs, err := allocsByJobTxn(txn, nil, job.ID)
	if err != nil {
		return err
	}
	placed := 0
	for _, a := range structs.LiveEndpointMembers(allocs, tg.Name) {
		if a.NodeID == "" {
			continue
		}
		n, err := nodeByIDTxn(txn, nil, a.NodeID)
		if err != nil {
			return err
		}
		if n == nil {
			continue
		}
		if n.IsOpportunistic() {
			return fmt.Errorf("endpoint %q: member %s runs on node %q (%s): %w", alias.Endpoint, a.ID, n.Name, n.ID, structs.ErrEndpointOpportunistic)
		}
		placed++
	}
	if placed == 0 {
		return fmt.Errorf("endpoint %q of job %q: %w", alias.Endpoint, job.ID, structs.ErrEndpointNotPlaced)
	}
	return nil
}

// DeleteEndpointAlias demotes alias name of namespace ns. Errors wrap
// structs.ErrNotFound when it is not promoted; then nothing is written.
func (s *StateStore) DeleteEndpointAlias(index uint64, ns, name string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	a, err := endpointAliasTxn(txn, nil, ns, name)
	if err != nil {
		return err
	}
	if a == nil {
		return notFound("endpoint alias", ns+"/"+name)
	}
	if err := txn.Delete(TableEndpointAliases, a); err != nil {
		return fmt.Errorf("state: delete endpoint alias %q: %w", name, err)
	}
	if err := setIndex(txn, TableEndpointAliases, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

func endpointAliasTxn(txn *memdb.Txn, ws memdb.WatchSet, ns, name string) (*structs.EndpointAlias, error) {
	watchCh, raw, err := txn.FirstWatch(TableEndpointAliases, "id", ns, name)
	if err != nil {
		return nil, fmt.Errorf("state: endpoint alias lookup %q: %w", name, err)
	}
	ws.Add(watchCh)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.EndpointAlias), nil
}

// EndpointAlias returns alias name of namespace ns, or nil.
func (s *StateStore) EndpointAlias(ws memdb.WatchSet, ns, name string) (*structs.EndpointAlias, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return endpointAliasTxn(txn, ws, ns, name)
}

// EndpointAliases returns every alias, sorted by namespace and name.
func (s *StateStore) EndpointAliases(ws memdb.WatchSet) ([]*structs.EndpointAlias, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.EndpointAlias](txn, ws, TableEndpointAliases, "id_prefix")
}

// EndpointAliasesByNamespace returns the aliases of namespace ns, sorted
// by name.
func (s *StateStore) EndpointAliasesByNamespace(ws memdb.WatchSet, ns string) ([]*structs.EndpointAlias, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	all, err := getAll[structs.EndpointAlias](txn, ws, TableEndpointAliases, "id_prefix", ns)
	if err != nil {
		return nil, err
	}
	// The prefix also matches longer namespaces ("default" and
	// "default2"): keep the exact ones.
	out := all[:0]
	for _, a := range all {
		if a.Namespace == ns {
			out = append(out, a)
		}
	}
	return out, nil
}

// EndpointAliasesByEndpoint returns the aliases of namespace ns resolving
// to endpoint, sorted by name.
func (s *StateStore) EndpointAliasesByEndpoint(ws memdb.WatchSet, ns, endpoint string) ([]*structs.EndpointAlias, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.EndpointAlias](txn, ws, TableEndpointAliases, "endpoint", ns, endpoint)
}

// EndpointAliasRestore inserts an alias from a snapshot. Errors wrap
// structs.ErrInvalid for a nil alias or one without namespace or name.
func (r *StateRestore) EndpointAliasRestore(a *structs.EndpointAlias) error {
	if a == nil || a.Namespace == "" || a.Name == "" {
		return invalid("restore endpoint alias: nil or without namespace and name")
	}
	return r.insert(TableEndpointAliases, a.Namespace+"/"+a.Name, a)
}
