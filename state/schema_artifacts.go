package state

import "github.com/hashicorp/go-memdb"

// TableArtifacts holds *structs.Artifact keyed by Digest.
const TableArtifacts = "artifacts"

// artifactsTableSchema stores artifact metadata keyed by Digest (the
// blob bytes live in each server's blob store, never here).
func artifactsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableArtifacts,
		Indexes: map[string]*memdb.IndexSchema{"id": {
			Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Digest"},
		}},
	}
}
