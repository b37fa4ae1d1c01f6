package fsm

import (
	"github.com/gpulayer/gpulayer/structs"
)

// Service registrations (structs/service.go).
func init() {
	register(structs.ServiceRegistrationUpsertRequestType, (*FSM).applyServiceRegistrationUpsert)
	register(structs.ServiceRegistrationDeleteByIDRequestType, (*FSM).applyServiceRegistrationDeleteByID)
	register(structs.ServiceRegistrationDeleteByAllocIDRequestType, (*FSM).applyServiceRegistrationDeleteByAllocID)
}

func (f *FSM) applyServiceRegistrationUpsert(index uint64, req *structs.ServiceRegistrationUpsertRequest) interface{} {
	return errResp(f.State().UpsertServiceRegistrations(index, req.Services))
}

func (f *FSM) applyServiceRegistrationDeleteByID(index uint64, req *structs.ServiceRegistrationDeleteByIDRequest) interface{} {
	return errResp(f.State().DeleteServiceRegistrationsByID(index, req.Namespace, req.IDs))
}

func (f *FSM) applyServiceRegistrationDeleteByAllocID(index uint64, req *structs.ServiceRegistrationDeleteByAllocIDRequest) interface{} {
	return errResp(f.State().DeleteServiceRegistrationsByAllocID(index, req.AllocIDs))
}
