package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertACLPolicies creates or replaces policies at Raft index index,
// keeping a replaced policy's CreateIndex. It stores copies. Errors wrap
// structs.ErrInvalid for a nil policy or an empty name.
func (s *StateStore) UpsertACLPolicies(index uint64, policies []*structs.ACLPolicy) error {
	txn := s.writeTxn()
	defer txn.Abort()
	for _, p := range policies {
		if p == nil || p.Name == "" {
			return invalid("ACL policy: nil or without name")
		}
		c := *p
		c.CreateIndex, c.ModifyIndex = index, index
		existing, err := firstByID[structs.ACLPolicy](txn, nil, TableACLPolicies, "ACL policy", p.Name)
		if err != nil {
			return err
		}
		if existing != nil {
			c.CreateIndex = existing.CreateIndex
		}
		if err := txn.Insert(TableACLPolicies, &c); err != nil {
			return fmt.Errorf("state: insert ACL policy %q: %w", c.Name, err)
		}
	}
	if err := setIndex(txn, TableACLPolicies, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// DeleteACLPolicies removes policies by name, all or none. Errors wrap
// structs.ErrNotFound when one does not exist.
func (s *StateStore) DeleteACLPolicies(index uint64, names []string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	for _, name := range names {
		existing, err := firstByID[structs.ACLPolicy](txn, nil, TableACLPolicies, "ACL policy", name)
		if err != nil {
			return err
		}
		if existing == nil {
			return notFound("ACL policy", name)
		}
		if err := txn.Delete(TableACLPolicies, existing); err != nil {
			return fmt.Errorf("state: delete ACL policy %q: %w", name, err)
		}
	}
	if err := setIndex(txn, TableACLPolicies, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// ACLPolicies returns every policy, sorted by name.
func (s *StateStore) ACLPolicies(ws memdb.WatchSet) ([]*structs.ACLPolicy, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.ACLPolicy](txn, ws, TableACLPolicies, "id")
}

// ACLPolicyByName returns the policy, or nil and no error when it does not
// exist.
func (s *StateStore) ACLPolicyByName(ws memdb.WatchSet, name string) (*structs.ACLPolicy, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.ACLPolicy](txn, ws, TableACLPolicies, "ACL policy", name)
}

// UpsertACLTokens creates or replaces tokens at Raft index index, keeping
// a replaced token's CreateIndex, SecretID and CreateTime. Errors wrap
// structs.ErrInvalid for a nil token, an empty AccessorID, a new token
// without SecretID, or a SecretID another token holds.
func (s *StateStore) UpsertACLTokens(index uint64, tokens []*structs.ACLToken) error {
	txn := s.writeTxn()
	defer txn.Abort()
	if err := upsertACLTokensTxn(txn, index, tokens); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

func upsertACLTokensTxn(txn *memdb.Txn, index uint64, tokens []*structs.ACLToken) error {
	for _, t := range tokens {
		if t == nil || t.AccessorID == "" {
			return invalid("ACL token: nil or without AccessorID")
		}
		c := t.Copy()
		c.CreateIndex, c.ModifyIndex = index, index
		existing, err := firstByID[structs.ACLToken](txn, nil, TableACLTokens, "ACL token", t.AccessorID)
		if err != nil {
			return err
		}
		if existing != nil {
			c.CreateIndex, c.SecretID, c.CreateTime = existing.CreateIndex, existing.SecretID, existing.CreateTime
		}
		if c.SecretID == "" {
			return invalid("ACL token %q: SecretID must not be empty", t.AccessorID)
		}
		other, err := txn.First(TableACLTokens, "secret", c.SecretID)
		if err != nil {
			return fmt.Errorf("state: ACL token secret lookup: %w", err)
		}
		if o, ok := other.(*structs.ACLToken); ok && o.AccessorID != c.AccessorID {
			return invalid("ACL token %q: SecretID already in use", t.AccessorID)
		}
		if err := txn.Insert(TableACLTokens, c); err != nil {
			return fmt.Errorf("state: insert ACL token %q: %w", c.AccessorID, err)
		}
	}
	return setIndex(txn, TableACLTokens, index)
}

// DeleteACLTokens removes tokens by AccessorID, all or none. Errors wrap
// structs.ErrNotFound when one does not exist.
func (s *StateStore) DeleteACLTokens(index uint64, accessors []string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	for _, id := range accessors {
		existing, err := firstByID[structs.ACLToken](txn, nil, TableACLTokens, "ACL token", id)
		if err != nil {
			return err
		}
		if existing == nil {
			return notFound("ACL token", id)
		}
		if err := txn.Delete(TableACLTokens, existing); err != nil {
			return fmt.Errorf("state: delete ACL token %q: %w", id, err)
		}
	}
	if err := setIndex(txn, TableACLTokens, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// ACLTokens returns every token, sorted by AccessorID.
func (s *StateStore) ACLTokens(ws memdb.WatchSet) ([]*structs.ACLToken, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.ACLToken](txn, ws, TableACLTokens, "id")
}

// ACLTokenByAccessor returns the token, or nil and no error when it does
// not exist.
func (s *StateStore) ACLTokenByAccessor(ws memdb.WatchSet, accessor string) (*structs.ACLToken, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.ACLToken](txn, ws, TableACLTokens, "ACL token", accessor)
}

// ACLTokenBySecret returns the token whose SecretID is secret, or nil and
// no error. The lookup is by the secret's SHA-256 (see the "secret"
// index); the caller compares the secrets in constant time.
func (s *StateStore) ACLTokenBySecret(ws memdb.WatchSet, secret string) (*structs.ACLToken, error) {
	if secret == "" {
		return nil, nil
	}
	txn := s.db.Txn(false)
	defer txn.Abort()
	watchCh, raw, err := txn.FirstWatch(TableACLTokens, "secret", secret)
	if err != nil {
		return nil, fmt.Errorf("state: ACL token secret lookup: %w", err)
	}
	ws.Add(watchCh)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.ACLToken), nil
}

// ACLBootstrap applies the bootstrap at Raft index index: it stores token
// and records the bootstrap in one transaction. Errors wrap
// structs.ErrACLBootstrapped when a bootstrap is already recorded, and
// structs.ErrInvalid for a nil or incomplete token.
func (s *StateStore) ACLBootstrap(index uint64, req *structs.ACLBootstrapRequest) error {
	if req == nil || req.Token == nil {
		return invalid("ACL bootstrap: no token")
	}
	txn := s.writeTxn()
	defer txn.Abort()
	done, err := firstByID[structs.ACLBootstrap](txn, nil, TableACLBootstrap, "ACL bootstrap", structs.ACLBootstrapID)
	if err != nil {
		return err
	}
	if done != nil {
		return fmt.Errorf("%w (at index %d)", structs.ErrACLBootstrapped, done.CreateIndex)
	}
	if err := upsertACLTokensTxn(txn, index, []*structs.ACLToken{req.Token}); err != nil {
		return err
	}
	if err := txn.Insert(TableACLBootstrap, &structs.ACLBootstrap{ID: structs.ACLBootstrapID, BootstrapTime: req.BootstrapTime, CreateIndex: index}); err != nil {
		return fmt.Errorf("state: record ACL bootstrap: %w", err)
	}
	if err := setIndex(txn, TableACLBootstrap, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// ACLBootstrapped returns the bootstrap record, or nil when the ACL system
// was never bootstrapped.
func (s *StateStore) ACLBootstrapped(ws memdb.WatchSet) (*structs.ACLBootstrap, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.ACLBootstrap](txn, ws, TableACLBootstrap, "ACL bootstrap", structs.ACLBootstrapID)
}

// ACLIndex returns the highest Raft index of the ACL tables: a resolved
// token stays valid while it is unchanged.
func (s *StateStore) ACLIndex() (uint64, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	var max uint64
	for _, t := range []string{TableACLPolicies, TableACLTokens, TableACLBootstrap} {
		v, err := indexTxn(txn, t)
		if err != nil {
			return 0, err
		}
		max = maxU64(max, v)
	}
	return max, nil
}

func maxU64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// RotateNodeSecret sets the node's SecretID at Raft index index. Errors
// wrap structs.ErrNotFound for an unknown node and structs.ErrInvalid for
// an empty secret.
func (s *StateStore) RotateNodeSecret(index uint64, nodeID, secret string) error {
	if secret == "" {
		return invalid("node %q: new SecretID must not be empty", nodeID)
	}
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
	n.SecretID = secret
	n.ModifyIndex = index
	if err := txn.Insert(TableNodes, n); err != nil {
		return fmt.Errorf("state: rotate node secret %q: %w", nodeID, err)
	}
	if err := setIndex(txn, TableNodes, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// ACLPolicyRestore inserts a policy from a snapshot. Errors wrap
// structs.ErrInvalid for a nil policy or an empty name.
func (r *StateRestore) ACLPolicyRestore(p *structs.ACLPolicy) error {
	if p == nil || p.Name == "" {
		return invalid("restore ACL policy: nil or without name")
	}
	return r.insert(TableACLPolicies, p.Name, p)
}

// ACLTokenRestore inserts a token from a snapshot. Errors wrap
// structs.ErrInvalid for a nil token or an empty AccessorID or SecretID.
func (r *StateRestore) ACLTokenRestore(t *structs.ACLToken) error {
	if t == nil || t.AccessorID == "" || t.SecretID == "" {
		return invalid("restore ACL token: nil or without AccessorID or SecretID")
	}
	return r.insert(TableACLTokens, t.AccessorID, t)
}

// ACLBootstrapRestore inserts the bootstrap record from a snapshot.
func (r *StateRestore) ACLBootstrapRestore(b *structs.ACLBootstrap) error {
	if b == nil || b.ID != structs.ACLBootstrapID {
		return invalid("restore ACL bootstrap: nil or with ID other than %q", structs.ACLBootstrapID)
	}
	return r.insert(TableACLBootstrap, b.ID, b)
}
