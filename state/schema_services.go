package state

import "github.com/hashicorp/go-memdb"

// TableServiceRegistrations holds *structs.ServiceRegistration keyed by
// ID.
const TableServiceRegistrations = "service_registrations"

// serviceRegistrationsTableSchema stores healthy service instances keyed by
// ID, with indexes on (Namespace, ServiceName) ("service"), AllocID
// ("alloc"), NodeID ("node") and JobID ("job").
func serviceRegistrationsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableServiceRegistrations,
		Indexes: map[string]*memdb.IndexSchema{
			"id": idIndex(),
			"service": {
				Name: "service",
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "Namespace"},
					&memdb.StringFieldIndex{Field: "ServiceName"},
				}},
			},
			"alloc": fieldIndex("alloc", "AllocID"),
			"node":  fieldIndex("node", "NodeID"),
			"job":   fieldIndex("job", "JobID"),
		},
	}
}
