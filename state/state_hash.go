package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// hashHandle encodes canonically: map keys sorted, so equal content gives
// equal bytes.
var hashHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true
	h.Canonical = true
	return h
}()

// Hash returns the hex SHA-256 of a canonical msgpack encoding of every
// table (index rows other than 0, jobs, nodes, allocations, evaluations), each in ID
// order, read in one transaction. Two stores with the same content, such as
// a leader's and a follower's at the same Raft index or a store and its
// snapshot-restored copy, have the same hash.
func (s *StateStore) Hash() (string, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	h := sha256.New()
	enc := codec.NewEncoder(h, hashHandle)
	for _, table := range []string{TableIndex, TableJobs, TableNodes, TableAllocs, TableEvals, TableACLPolicies, TableACLTokens, TableACLBootstrap, TableArtifacts,
		// Service registrations.
		TableServiceRegistrations,
		// Job versions and deployments.
		TableDeployments,
		// Periodic jobs.
		TablePeriodicLaunch,
		// Node pools.
		TableNodePools,
		// Provisioning.
		TableProvisionRequests} {
		it, err := txn.Get(table, "id")
		if err != nil {
			return "", fmt.Errorf("state: hash %s: %w", table, err)
		}
		if err := enc.Encode(table); err != nil {
			return "", fmt.Errorf("state: hash %s: %w", table, err)
		}
		if err := hashRows(enc, it); err != nil {
			return "", fmt.Errorf("state: hash %s: %w", table, err)
		}
	}
	// Tables with a compound primary key are listed through its prefix
	// index (same order).
	for _, table := range []string{TableJobVersions,
		// Endpoint aliases.
		TableEndpointAliases} {
		it, err := txn.Get(table, "id_prefix")
		if err != nil {
			return "", fmt.Errorf("state: hash %s: %w", table, err)
		}
		if err := enc.Encode(table); err != nil {
			return "", fmt.Errorf("state: hash %s: %w", table, err)
		}
		if err := hashRows(enc, it); err != nil {
			return "", fmt.Errorf("state: hash %s: %w", table, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashRows(enc *codec.Encoder, it memdb.ResultIterator) error {
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if ie, ok := raw.(*IndexEntry); ok && ie.Value == 0 {
			continue // same as no row: the table never changed
		}
		if err := enc.Encode(raw); err != nil {
			return err
		}
	}
	return nil
}
