package state

import "github.com/hashicorp/go-memdb"

// TableEndpointAliases holds *structs.EndpointAlias keyed by (Namespace,
// Name), with an index on (Namespace, Endpoint) ("endpoint"): the aliases
// resolving to one endpoint.
const TableEndpointAliases = "endpoint_aliases"

func endpointAliasesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableEndpointAliases,
		Indexes: map[string]*memdb.IndexSchema{
			"id": {
				Name:   "id",
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "Namespace"},
					&memdb.StringFieldIndex{Field: "Name"},
				}},
			},
			"endpoint": {
				Name: "endpoint",
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "Namespace"},
					&memdb.StringFieldIndex{Field: "Endpoint"},
				}},
			},
		},
	}
}
