package state

import (
	"crypto/sha256"
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// aclPoliciesTableSchema stores *structs.ACLPolicy keyed by Name.
func aclPoliciesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableACLPolicies,
		Indexes: map[string]*memdb.IndexSchema{"id": {
			Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"},
		}},
	}
}

// aclTokensTableSchema stores *structs.ACLToken keyed by AccessorID, with
// a unique "secret" index on the SHA-256 of SecretID: a lookup by secret
// walks the radix tree by hash bytes, so its timing tells nothing about
// the secret's bytes.
func aclTokensTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: TableACLTokens,
		Indexes: map[string]*memdb.IndexSchema{
			"id":     {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "AccessorID"}},
			"secret": {Name: "secret", Unique: true, Indexer: secretHashIndexer{}},
		},
	}
}

// aclBootstrapTableSchema stores the one *structs.ACLBootstrap row.
func aclBootstrapTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name:    TableACLBootstrap,
		Indexes: map[string]*memdb.IndexSchema{"id": idIndex()},
	}
}

// secretHashIndexer indexes an *structs.ACLToken by sha256(SecretID);
// FromArgs hashes the secret given.
type secretHashIndexer struct{}

func (secretHashIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	t, ok := obj.(*structs.ACLToken)
	if !ok {
		return false, nil, fmt.Errorf("secret index: %T is not an ACL token", obj)
	}
	if t.SecretID == "" {
		return false, nil, nil
	}
	sum := sha256.Sum256([]byte(t.SecretID))
	return true, sum[:], nil
}

func (secretHashIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("secret index: want one argument")
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("secret index: argument is %T, want string", args[0])
	}
	sum := sha256.Sum256([]byte(s))
	return sum[:], nil
}
