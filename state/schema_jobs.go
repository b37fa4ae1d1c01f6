package state

import "github.com/hashicorp/go-memdb"

// jobsTableSchema stores *structs.Job keyed by ID, with an index on
// ParentID for a periodic or parameterized job's children.
func jobsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableJobs,
		Indexes: map[string]*memdb.IndexSchema{
			"id":     idIndex(),
			"parent": fieldIndex("parent", "ParentID"),
		},
	}
}
