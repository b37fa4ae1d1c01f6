package fsm

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// deploymentMessageTypes counts the message types registered below (the
// FSM contract test checks the total).
const deploymentMessageTypes = 4

// Job versions and deployments.
func init() {
	register(structs.JobStabilityRequestType, (*FSM).applyJobStability)
	register(structs.DeploymentStatusUpdateRequestType, (*FSM).applyDeploymentStatusUpdate)
	register(structs.DeploymentPromoteRequestType, (*FSM).applyDeploymentPromote)
	register(structs.DeploymentAllocHealthRequestType, (*FSM).applyDeploymentAllocHealth)
}

// applyJobStability sets Stable on one stored job version.
func (f *FSM) applyJobStability(index uint64, req *structs.JobStabilityRequest) interface{} {
	if req.JobID == "" {
		return fmt.Errorf("%w: job stability without a job ID", structs.ErrInvalid)
	}
	return errResp(f.State().UpdateJobStability(index, req.JobID, req.JobVersion, req.Stable))
}

// checkRevertJob checks an entry's auto-revert job before any write.
func checkRevertJob(job *structs.Job) error {
	if job != nil && job.ID == "" {
		return fmt.Errorf("%w: revert job without an ID", structs.ErrInvalid)
	}
	return nil
}

// applyDeploymentStatusUpdate sets a deployment's status, then registers
// the auto-revert job and creates the evaluation, each when set.
func (f *FSM) applyDeploymentStatusUpdate(index uint64, req *structs.DeploymentStatusUpdateRequest) interface{} {
	if req.Eval != nil {
		if err := checkEvals(req.Eval); err != nil {
			return err
		}
	}
	if err := checkRevertJob(req.Job); err != nil {
		return err
	}
	s := f.State()
	if err := s.UpdateDeploymentStatus(index, req.DeploymentUpdate, req.UpdatedAt); err != nil {
		return err
	}
	return f.revertAndEval(index, req.Job, req.Eval)
}

// applyDeploymentPromote promotes canaries and creates the evaluation.
func (f *FSM) applyDeploymentPromote(index uint64, req *structs.DeploymentPromoteRequest) interface{} {
	if req.Eval != nil {
		if err := checkEvals(req.Eval); err != nil {
			return err
		}
	}
	if err := f.State().PromoteDeployment(index, req); err != nil {
		return err
	}
	return f.revertAndEval(index, nil, req.Eval)
}

// applyDeploymentAllocHealth records allocation health (and a status
// change), then registers the auto-revert job and creates the evaluation.
func (f *FSM) applyDeploymentAllocHealth(index uint64, req *structs.DeploymentAllocHealthRequest) interface{} {
	if req.Eval != nil {
		if err := checkEvals(req.Eval); err != nil {
			return err
		}
	}
	if err := checkRevertJob(req.Job); err != nil {
		return err
	}
	if err := f.State().SetAllocDeploymentHealth(index, req); err != nil {
		return err
	}
	return f.revertAndEval(index, req.Job, req.Eval)
}

// revertAndEval registers job (an auto-revert) and upserts eval, each when
// set.
func (f *FSM) revertAndEval(index uint64, job *structs.Job, eval *structs.Evaluation) interface{} {
	s := f.State()
	if job != nil {
		if err := s.UpsertJob(index, job); err != nil {
			return err
		}
	}
	if eval != nil {
		return errResp(s.UpsertEvals(index, []*structs.Evaluation{eval}))
	}
	return nil
}
