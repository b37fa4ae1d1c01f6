package state

import "github.com/hashicorp/go-memdb"

// TableDeployments holds *structs.Deployment keyed by ID, with an index on
// JobID ("job").
const TableDeployments = "deployments"

func deploymentsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableDeployments,
		Indexes: map[string]*memdb.IndexSchema{
			"id":  idIndex(),
			"job": fieldIndex("job", "JobID"),
		},
	}
}
