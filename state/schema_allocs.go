package state

import "github.com/hashicorp/go-memdb"

// allocsTableSchema stores *structs.Allocation keyed by ID, with secondary
// indexes on JobID ("job"), NodeID ("node") and DeploymentID
// ("deployment"). EvalID has none (AllocsByEval reads by job): an index
// costs memory for every allocation and a write at each of its updates.
func allocsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableAllocs,
		Indexes: map[string]*memdb.IndexSchema{
			"id":   idIndex(),
			"job":  fieldIndex("job", "JobID"),
			"node": fieldIndex("node", "NodeID"),
			// Job versions and deployments.
			"deployment": fieldIndex("deployment", "DeploymentID"),
		},
	}
}
