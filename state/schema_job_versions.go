package state

import "github.com/hashicorp/go-memdb"

// TableJobVersions holds every kept version of every job (*structs.Job,
// the same immutable objects the jobs table stores), keyed by (ID,
// Version). At most structs.JobTrackedVersions per job are kept.
const TableJobVersions = "job_versions"

// jobVersionsTableSchema indexes versions by job ID and version; list a
// job's versions with the "id_prefix" index and the job ID (then filter on
// the exact ID: a prefix of "web" also matches "web2").
func jobVersionsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableJobVersions,
		Indexes: map[string]*memdb.IndexSchema{"id": {
			Name:   "id",
			Unique: true,
			Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.StringFieldIndex{Field: "ID"},
				&memdb.UintFieldIndex{Field: "Version"},
			}},
		}},
	}
}
