package state

import "github.com/hashicorp/go-memdb"

// TableNodePools holds the written *structs.NodePool keyed by Name. The
// built-in pools "default" and "all" exist without a row (NodePools adds
// them); "default" gets one once it is written.
const TableNodePools = "node_pools"

// nodePoolsTableSchema stores node pools keyed by name ("id").
func nodePoolsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableNodePools,
		Indexes: map[string]*memdb.IndexSchema{
			"id": {
				Name:    "id",
				Unique:  true,
				Indexer: &memdb.StringFieldIndex{Field: "Name"},
			},
		},
	}
}
