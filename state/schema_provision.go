package state

import "github.com/hashicorp/go-memdb"

// TableProvisionRequests holds *structs.ProvisionRequest keyed by ID, with
// indexes on Pool ("pool") and Status ("status").
const TableProvisionRequests = "provision_requests"

func provisionRequestsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableProvisionRequests,
		Indexes: map[string]*memdb.IndexSchema{
			"id":     idIndex(),
			"pool":   fieldIndex("pool", "Pool"),
			"status": fieldIndex("status", "Status"),
		},
	}
}
