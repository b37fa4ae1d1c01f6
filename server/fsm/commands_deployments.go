package fsm

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// deploymentMessageTypes counts the message types registered below (the
// FSM contract test checks the total).
const deploymentMessageTypes = 1

// Job versions and deployments.
func init() {
	register(structs.JobStabilityRequestType, (*FSM).applyJobStability)
}

// applyJobStability sets Stable on one stored job version.
func (f *FSM) applyJobStability(index uint64, req *structs.JobStabilityRequest) interface{} {
	if req.JobID == "" {
		return fmt.Errorf("%w: job stability without a job ID", structs.ErrInvalid)
	}
	return errResp(f.State().UpdateJobStability(index, req.JobID, req.JobVersion, req.Stable))
}
