package fsm

import (
	"github.com/gpulayer/gpulayer/structs"
)

func init() {
	register(structs.ACLPolicyUpsertRequestType, (*FSM).applyACLPolicyUpsert)
	register(structs.ACLPolicyDeleteRequestType, (*FSM).applyACLPolicyDelete)
	register(structs.ACLTokenUpsertRequestType, (*FSM).applyACLTokenUpsert)
	register(structs.ACLTokenDeleteRequestType, (*FSM).applyACLTokenDelete)
	register(structs.ACLBootstrapRequestType, (*FSM).applyACLBootstrap)
	register(structs.NodeSecretRotateRequestType, (*FSM).applyNodeSecretRotate)
}

func (f *FSM) applyACLPolicyUpsert(index uint64, req *structs.ACLPolicyUpsertRequest) interface{} {
	return errResp(f.State().UpsertACLPolicies(index, req.Policies))
}

func (f *FSM) applyACLPolicyDelete(index uint64, req *structs.ACLPolicyDeleteRequest) interface{} {
	return errResp(f.State().DeleteACLPolicies(index, req.Names))
}

func (f *FSM) applyACLTokenUpsert(index uint64, req *structs.ACLTokenUpsertRequest) interface{} {
	return errResp(f.State().UpsertACLTokens(index, req.Tokens))
}

func (f *FSM) applyACLTokenDelete(index uint64, req *structs.ACLTokenDeleteRequest) interface{} {
	return errResp(f.State().DeleteACLTokens(index, req.AccessorIDs))
}

// applyACLBootstrap stores the first management token; a second bootstrap
// returns an error wrapping structs.ErrACLBootstrapped and changes nothing.
func (f *FSM) applyACLBootstrap(index uint64, req *structs.ACLBootstrapRequest) interface{} {
	return errResp(f.State().ACLBootstrap(index, req))
}

func (f *FSM) applyNodeSecretRotate(index uint64, req *structs.NodeSecretRotateRequest) interface{} {
	return errResp(f.State().RotateNodeSecret(index, req.NodeID, req.SecretID))
}
