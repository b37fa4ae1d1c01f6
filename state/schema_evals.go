package state

import "github.com/hashicorp/go-memdb"

// evalsTableSchema stores *structs.Evaluation keyed by ID, with a secondary
// index on JobID ("job").
func evalsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableEvals,
		Indexes: map[string]*memdb.IndexSchema{
			"id":  idIndex(),
			"job": fieldIndex("job", "JobID"),
		},
	}
}
