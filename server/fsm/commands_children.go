package fsm

import (
	"github.com/gpulayer/gpulayer/structs"
)

// Periodic and parameterized jobs: launches, dispatches and the release
// of held children (structs/job_children.go, state/state_children.go).
func init() {
	register(structs.PeriodicLaunchRequestType, (*FSM).applyPeriodicLaunch)
	register(structs.JobDispatchRequestType, (*FSM).applyJobDispatch)
	register(structs.JobChildrenReleaseRequestType, (*FSM).applyJobChildrenRelease)
}

// applyPeriodicLaunch registers a periodic job's child unless that launch
// was decided already; the response is a *structs.ChildLaunchResult or an
// error.
func (f *FSM) applyPeriodicLaunch(index uint64, req *structs.PeriodicLaunchRequest) interface{} {
	res, err := f.State().ApplyPeriodicLaunch(index, req)
	if err != nil {
		return err
	}
	return res
}

// applyJobDispatch registers a dispatched child unless its idempotency
// token names an existing one; the response is a *structs.ChildLaunchResult
// or an error.
func (f *FSM) applyJobDispatch(index uint64, req *structs.JobDispatchRequest) interface{} {
	res, err := f.State().ApplyJobDispatch(index, req)
	if err != nil {
		return err
	}
	return res
}

// applyJobChildrenRelease starts held children as room allows; the
// response is the []string of released job IDs or an error.
func (f *FSM) applyJobChildrenRelease(index uint64, req *structs.JobChildrenReleaseRequest) interface{} {
	released, err := f.State().ReleaseHeldChildren(index, req.ParentID, req.Evals)
	if err != nil {
		return err
	}
	return released
}
