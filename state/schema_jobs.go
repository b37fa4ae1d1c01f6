package state

import "github.com/hashicorp/go-memdb"

// jobsTableSchema stores *structs.Job keyed by ID.
func jobsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name:    TableJobs,
		Indexes: map[string]*memdb.IndexSchema{"id": idIndex()},
	}
}
