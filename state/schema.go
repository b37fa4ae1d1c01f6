// Package state is GPUlayer's in-memory state store: go-memdb tables for
// jobs, nodes, allocations and evaluations, plus an index table that records,
// per table, the Raft index of its last change.
//
// Only the FSM writes the store, one Raft entry at a time; each write runs in
// one memdb write transaction, bumps the touched tables' index rows in that
// same transaction, and stores copies of its inputs. Stored objects are never
// mutated after insert: a change copies the object, changes the copy and
// upserts it. Readers get the stored pointers and must not mutate them.
package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Table names, also the keys of their rows in the index table.
const (
	TableIndex  = "index"
	TableJobs   = "jobs"
	TableNodes  = "nodes"
	TableAllocs = "allocs"
	TableEvals  = "evals"

	TableACLPolicies  = "acl_policies"
	TableACLTokens    = "acl_tokens"
	TableACLBootstrap = "acl_bootstrap"
)

// indexedTables lists the tables whose Raft index is tracked in TableIndex.
var indexedTables = []string{TableJobs, TableNodes, TableAllocs, TableEvals, TableACLPolicies, TableACLTokens, TableACLBootstrap, TableArtifacts,
	// Service registrations.
	TableServiceRegistrations,
	// Job versions and deployments.
	TableJobVersions, TableDeployments,
	// Periodic jobs.
	TablePeriodicLaunch,
	// Endpoint aliases.
	TableEndpointAliases,
	// Node pools.
	TableNodePools,
	// Provisioning.
	TableProvisionRequests}

// IndexEntry is a row of the index table: the Raft index at which the table
// named Key last changed.
type IndexEntry struct {
	Key   string
	Value uint64
}

// schemaFns builds each table's schema; one function per table, in
// schema_<table>.go.
var schemaFns = []func() *memdb.TableSchema{
	indexTableSchema,
	jobsTableSchema,
	nodesTableSchema,
	allocsTableSchema,
	evalsTableSchema,
	aclPoliciesTableSchema,
	aclTokensTableSchema,
	aclBootstrapTableSchema,
	artifactsTableSchema,
	// Service registrations.
	serviceRegistrationsTableSchema,
	// Job versions and deployments.
	jobVersionsTableSchema,
	deploymentsTableSchema,
	// Periodic jobs.
	periodicLaunchTableSchema,
	// Endpoint aliases.
	endpointAliasesTableSchema,
	// Node pools.
	nodePoolsTableSchema,
	// Provisioning.
	provisionRequestsTableSchema,
	// The client allocation watch's per-node index (derived, issue 17).
	nodeAllocChangesTableSchema,
}

// dbSchema returns the full memdb schema. It returns an error when a table's
// schema is invalid or a table name is duplicated.
func dbSchema() (*memdb.DBSchema, error) {
	db := &memdb.DBSchema{Tables: make(map[string]*memdb.TableSchema, len(schemaFns))}
	for _, fn := range schemaFns {
		ts := fn()
		if _, ok := db.Tables[ts.Name]; ok {
			return nil, fmt.Errorf("state schema: table %q defined twice", ts.Name)
		}
		db.Tables[ts.Name] = ts
	}
	if err := db.Validate(); err != nil {
		return nil, fmt.Errorf("state schema: %w", err)
	}
	return db, nil
}

// idIndex is the primary key index on the string field ID.
func idIndex() *memdb.IndexSchema {
	return &memdb.IndexSchema{
		Name:    "id",
		Unique:  true,
		Indexer: &memdb.StringFieldIndex{Field: "ID"},
	}
}

// fieldIndex is a non-unique index on a string field that may be empty.
func fieldIndex(name, field string) *memdb.IndexSchema {
	return &memdb.IndexSchema{
		Name:         name,
		AllowMissing: true,
		Indexer:      &memdb.StringFieldIndex{Field: field},
	}
}
