package state

import "github.com/hashicorp/go-memdb"

// indexTableSchema holds one IndexEntry per indexed table, keyed by the
// table name.
func indexTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableIndex,
		Indexes: map[string]*memdb.IndexSchema{
			"id": {
				Name:    "id",
				Unique:  true,
				Indexer: &memdb.StringFieldIndex{Field: "Key"},
			},
		},
	}
}
