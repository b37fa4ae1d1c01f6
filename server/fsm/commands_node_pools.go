package fsm

import "github.com/gpulayer/gpulayer/structs"

// Node pools (structs/node_pool.go).
func init() {
	register(structs.NodePoolUpsertRequestType, (*FSM).applyNodePoolUpsert)
	register(structs.NodePoolDeleteRequestType, (*FSM).applyNodePoolDelete)
}

func (f *FSM) applyNodePoolUpsert(index uint64, req *structs.NodePoolUpsertRequest) interface{} {
	return errResp(f.State().UpsertNodePools(index, req.NodePools))
}

func (f *FSM) applyNodePoolDelete(index uint64, req *structs.NodePoolDeleteRequest) interface{} {
	return errResp(f.State().DeleteNodePools(index, req.Names))
}
