package state

import "github.com/hashicorp/go-memdb"

// allocsTableSchema stores *structs.Allocation keyed by ID, with secondary
// indexes on JobID ("job"), NodeID ("node"), EvalID ("eval") and
// DeploymentID ("deployment").
func allocsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableAllocs,
		Indexes: map[string]*memdb.IndexSchema{
			"id":   idIndex(),
			"job":  fieldIndex("job", "JobID"),
			"node": fieldIndex("node", "NodeID"),
			"eval": fieldIndex("eval", "EvalID"),
			// Job versions and deployments.
			"deployment": fieldIndex("deployment", "DeploymentID"),
		},
	}
}
