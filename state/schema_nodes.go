package state

import "github.com/hashicorp/go-memdb"

// nodesTableSchema stores *structs.Node keyed by ID.
func nodesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name:    TableNodes,
		Indexes: map[string]*memdb.IndexSchema{"id": idIndex()},
	}
}
