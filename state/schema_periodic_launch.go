package state

import "github.com/hashicorp/go-memdb"

// TablePeriodicLaunch holds *structs.PeriodicLaunch keyed by the periodic
// job's ID.
const TablePeriodicLaunch = "periodic_launch"

func periodicLaunchTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name:    TablePeriodicLaunch,
		Indexes: map[string]*memdb.IndexSchema{"id": idIndex()},
	}
}
