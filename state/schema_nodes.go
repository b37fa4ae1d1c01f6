package state

import "github.com/hashicorp/go-memdb"

// nodesTableSchema stores *structs.Node keyed by ID, with an index on
// NodePool ("node_pool"; a node with an empty NodePool, in "default", is
// not in it).
func nodesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableNodes,
		Indexes: map[string]*memdb.IndexSchema{
			"id":        idIndex(),
			"node_pool": fieldIndex("node_pool", "NodePool"),
		},
	}
}
