package fsm

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// applyFn applies one decoded request at a Raft index and returns the
// response: nil or an error.
type applyFn func(f *FSM, index uint64, req interface{}) interface{}

// decodeFn decodes a request body (the entry without its type byte).
type decodeFn func(buf []byte) (interface{}, error)

// commands and decoders are filled at init by register, one entry per
// message type (the Consul agent/consul/fsm/commands_ce.go pattern).
var (
	commands = map[structs.MessageType]applyFn{}
	decoders = map[structs.MessageType]decodeFn{}
)

// register adds the handler for message type t, whose body decodes into a
// T. It panics when t is registered twice or carries
// structs.IgnoreUnknownTypeFlag: both are programming errors found at
// start-up.
func register[T any](t structs.MessageType, fn func(f *FSM, index uint64, req *T) interface{}) {
	if t&structs.IgnoreUnknownTypeFlag != 0 {
		panic(fmt.Sprintf("fsm: message type %d registered with the ignore flag", uint8(t)))
	}
	if _, ok := commands[t]; ok {
		panic(fmt.Sprintf("fsm: message type %s registered twice", t))
	}
	decoders[t] = func(buf []byte) (interface{}, error) {
		req := new(T)
		if err := structs.Decode(buf, req); err != nil {
			return nil, err
		}
		return req, nil
	}
	commands[t] = func(f *FSM, index uint64, req interface{}) interface{} {
		r, ok := req.(*T)
		if !ok {
			return fmt.Errorf("%w: %s: request is %T", structs.ErrInvalid, t, req)
		}
		return fn(f, index, r)
	}
}

func init() {
	register(structs.NodeRegisterRequestType, (*FSM).applyNodeRegister)
	register(structs.NodeDeregisterRequestType, (*FSM).applyNodeDeregister)
	register(structs.NodeUpdateStatusRequestType, (*FSM).applyNodeUpdateStatus)
	register(structs.JobRegisterRequestType, (*FSM).applyJobRegister)
	register(structs.JobDeregisterRequestType, (*FSM).applyJobDeregister)
	register(structs.EvalUpdateRequestType, (*FSM).applyEvalUpdate)
	register(structs.EvalDeleteRequestType, (*FSM).applyEvalDelete)
	register(structs.ApplyPlanResultsRequestType, (*FSM).applyPlanResults)
	register(structs.AllocClientUpdateRequestType, (*FSM).applyAllocClientUpdate)
	register(structs.GCPurgeRequestType, (*FSM).applyGCPurge)
}

// errResp turns a nil error into a nil interface (not a typed nil).
func errResp(err error) interface{} {
	if err != nil {
		return err
	}
	return nil
}

// checkEvals validates evaluations before any write of an entry, so an
// entry that would fail half-way changes nothing.
func checkEvals(evals ...*structs.Evaluation) error {
	for _, e := range evals {
		if e == nil || e.ID == "" {
			return fmt.Errorf("%w: evaluation nil or without ID", structs.ErrInvalid)
		}
	}
	return nil
}

func (f *FSM) applyNodeRegister(index uint64, req *structs.NodeRegisterRequest) interface{} {
	if err := f.State().UpsertNode(index, req.Node); err != nil {
		return err
	}
	f.capacityFreed(index)
	return nil
}

func (f *FSM) applyNodeDeregister(index uint64, req *structs.NodeDeregisterRequest) interface{} {
	return errResp(f.State().DeleteNode(index, req.NodeID))
}

func (f *FSM) applyNodeUpdateStatus(index uint64, req *structs.NodeUpdateStatusRequest) interface{} {
	if err := checkEvals(req.Evals...); err != nil {
		return err
	}
	s := f.State()
	old, err := s.NodeByID(nil, req.NodeID)
	if err != nil {
		return err
	}
	if err := s.UpdateNodeStatus(index, req.NodeID, req.Status, req.UpdatedAtUnix()); err != nil {
		return err
	}
	if len(req.Evals) > 0 {
		if err := s.UpsertEvals(index, req.Evals); err != nil {
			return err
		}
	}
	if req.Status == structs.NodeStatusReady && old.Status != structs.NodeStatusReady {
		f.capacityFreed(index)
	}
	return nil
}

func (f *FSM) applyJobRegister(index uint64, req *structs.JobRegisterRequest) interface{} {
	if req.Job == nil {
		return fmt.Errorf("%w: job register without a job", structs.ErrInvalid)
	}
	if req.Eval != nil {
		if err := checkEvals(req.Eval); err != nil {
			return err
		}
	}
	s := f.State()
	if req.PriorVersion != nil {
		cur, err := s.JobByID(nil, req.Job.ID)
		if err != nil {
			return err
		}
		if cur == nil || cur.Version != *req.PriorVersion {
			have := "no job"
			if cur != nil {
				have = fmt.Sprintf("version %d", cur.Version)
			}
			return fmt.Errorf("job register %q: %w: EnforcePriorVersion: stored is %s, not version %d", req.Job.ID, structs.ErrInvalid, have, *req.PriorVersion)
		}
	}
	if err := EndpointNameConflict(s, req.Job); err != nil {
		return err
	}
	if err := s.UpsertJob(index, req.Job); err != nil {
		return err
	}
	if req.Eval != nil {
		return errResp(s.UpsertEvals(index, []*structs.Evaluation{req.Eval}))
	}
	return nil
}

// applyJobDeregister stops the job (a copy with Stop set) or, with Purge,
// deletes it, and upserts the evaluation. A missing job returns a wrapped
// structs.ErrNotFound and changes nothing.
func (f *FSM) applyJobDeregister(index uint64, req *structs.JobDeregisterRequest) interface{} {
	if req.Eval != nil {
		if err := checkEvals(req.Eval); err != nil {
			return err
		}
	}
	s := f.State()
	job, err := s.JobByID(nil, req.JobID)
	if err != nil {
		return err
	}
	if job == nil {
		return fmt.Errorf("job %q: %w", req.JobID, structs.ErrNotFound)
	}
	if req.Purge {
		if err := s.DeleteJob(index, req.JobID); err != nil {
			return err
		}
	} else {
		stopped := job.Copy()
		stopped.Stop = true
		if err := s.UpsertJob(index, stopped); err != nil {
			return err
		}
	}
	if req.Eval != nil {
		if err := s.UpsertEvals(index, []*structs.Evaluation{req.Eval}); err != nil {
			return err
		}
	}
	if req.Purge {
		f.capacityFreed(index)
	}
	return nil
}

func (f *FSM) applyEvalUpdate(index uint64, req *structs.EvalUpdateRequest) interface{} {
	return errResp(f.State().UpsertEvals(index, req.Evals))
}

func (f *FSM) applyEvalDelete(index uint64, req *structs.EvalDeleteRequest) interface{} {
	return errResp(f.State().DeleteEvals(index, req.Evals, req.Allocs))
}

// applyGCPurge removes the jobs (with their listed evaluations and
// allocations) and nodes the garbage collector chose, each only while its
// ModifyIndex is unchanged (state.PurgeGC). It frees no capacity: the
// allocations it removes are already client-terminal.
func (f *FSM) applyGCPurge(index uint64, req *structs.GCPurgeRequest) interface{} {
	return errResp(f.State().PurgeGC(index, req))
}

func (f *FSM) applyPlanResults(index uint64, req *structs.ApplyPlanResultsRequest) interface{} {
	return errResp(f.State().UpsertPlanResults(index, req))
}

// applyAllocClientUpdate records client status and creates the entry's
// evaluations; it reports freed capacity when an allocation becomes
// client-terminal.
func (f *FSM) applyAllocClientUpdate(index uint64, req *structs.AllocClientUpdateRequest) interface{} {
	if err := checkEvals(req.Evals...); err != nil {
		return err
	}
	s := f.State()
	freed := false
	for _, upd := range req.Allocs {
		if upd == nil {
			continue // UpdateAllocsFromClient rejects it below
		}
		old, err := s.AllocByID(nil, upd.ID)
		if err != nil {
			return err
		}
		if old != nil && !old.ClientTerminalStatus() && upd.ClientTerminalStatus() {
			freed = true
		}
	}
	if err := s.UpdateAllocsFromClient(index, req.Allocs, req.UpdatedAt); err != nil {
		return err
	}
	if len(req.Evals) > 0 {
		if err := s.UpsertEvals(index, req.Evals); err != nil {
			return err
		}
	}
	if freed {
		f.capacityFreed(index)
	}
	return nil
}
