package fsm

import (
	"fmt"
	"strings"

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
	job, u, err := f.revertStillDue(req.Job, req.DeploymentUpdate)
	if err != nil {
		return err
	}
	if err := s.UpdateDeploymentStatus(index, u, req.UpdatedAt); err != nil {
		return err
	}
	return f.revertAndEval(index, job, req.Eval)
}

// revertStillDue returns the auto-revert job and status update to apply:
// job and u as sent, unless the job is no longer at the failed
// deployment's version (a newer version was registered after the entry
// was decided, or it is gone), or the version it restores declares an
// endpoint name another live job of the namespace now declares. Then the
// revert would overwrite that version, or share the name: it is dropped
// and the description says so.
func (f *FSM) revertStillDue(job *structs.Job, u *structs.DeploymentStatusUpdate) (*structs.Job, *structs.DeploymentStatusUpdate, error) {
	if job == nil || u == nil {
		return job, u, nil
	}
	s := f.State()
	d, err := s.DeploymentByID(nil, u.DeploymentID)
	if err != nil || d == nil {
		return job, u, err // the status update reports the unknown deployment
	}
	cur, err := s.JobByID(nil, d.JobID)
	if err != nil {
		return nil, nil, err
	}
	var why string
	switch {
	case cur == nil:
		why = "the job is gone"
	case cur.ID != job.ID || cur.Version != d.JobVersion:
		why = fmt.Sprintf("the job is at version %d now", cur.Version)
	default:
		// The rollback is a job register that skips applyJobRegister:
		// the version it restores may declare an endpoint name another
		// live job took since.
		conflict := EndpointNameConflict(s, job)
		if conflict == nil {
			return job, u, nil
		}
		why = conflict.Error()
	}
	c := *u
	c.StatusDescription = strings.TrimSuffix(c.StatusDescription, structs.DeploymentStatusDescriptionRollback("", job.Version))
	c.StatusDescription += " - not rolling back: " + why
	return nil, &c, nil
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
	job, u, err := f.revertStillDue(req.Job, req.DeploymentUpdate)
	if err != nil {
		return err
	}
	if u != req.DeploymentUpdate {
		c := *req
		c.DeploymentUpdate = u
		req = &c
	}
	if err := f.State().SetAllocDeploymentHealth(index, req); err != nil {
		return err
	}
	return f.revertAndEval(index, job, req.Eval)
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
