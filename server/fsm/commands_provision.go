package fsm

import (
	"github.com/gpulayer/gpulayer/structs"
)

// provisionMessageTypes counts the message types registered below (the
// FSM contract test checks the total).
const provisionMessageTypes = 3

// Provisioning (issue 16): the outbox of provision requests.
func init() {
	register(structs.ProvisionRequestUpsertRequestType, (*FSM).applyProvisionRequestUpsert)
	register(structs.ProvisionResultRequestType, (*FSM).applyProvisionResult)
	register(structs.ProvisionRequestDeleteRequestType, (*FSM).applyProvisionRequestDelete)
}

// applyProvisionRequestUpsert records provision requests, all or none.
func (f *FSM) applyProvisionRequestUpsert(index uint64, req *structs.ProvisionRequestUpsertRequest) interface{} {
	return errResp(f.State().UpsertProvisionRequests(index, req.Requests))
}

// applyProvisionResult applies a provider answer only when the request is
// unchanged since the executor read it (its ModifyIndex equals
// ExpectedIndex); a stale answer is dropped, counted, and answered with
// Applied false.
func (f *FSM) applyProvisionResult(index uint64, req *structs.ProvisionResultRequest) interface{} {
	applied, err := f.State().ApplyProvisionResult(index, req)
	if err != nil {
		return err
	}
	if !applied {
		f.staleProvisionResults.Add(1)
	}
	return &structs.ProvisionResultResponse{Applied: applied}
}

// applyProvisionRequestDelete removes finished requests (GC).
func (f *FSM) applyProvisionRequestDelete(index uint64, req *structs.ProvisionRequestDeleteRequest) interface{} {
	return errResp(f.State().DeleteProvisionRequests(index, req.IDs))
}

// StaleProvisionResults counts provider answers this FSM dropped because
// their request had changed since the executor read it.
func (f *FSM) StaleProvisionResults() uint64 { return f.staleProvisionResults.Load() }
