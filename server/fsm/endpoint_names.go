package fsm

import (
	"fmt"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// EndpointNameConflict returns an error wrapping
// structs.ErrEndpointConflict when a live job (not stopped, not dead)
// other than job, in job's namespace, declares one of job's endpoint
// names; nil otherwise (at once for a job without endpoints). It reads
// every job. The FSM checks it when it applies a job register, so two
// registrations that both passed the server's early check (on two leaders
// across an election) cannot both land; the server checks it before Raft
// too, to answer at once.
func EndpointNameConflict(st *state.StateStore, job *structs.Job) error {
	mine := map[string]string{}
	for _, tg := range job.TaskGroups {
		if tg != nil && tg.Endpoint != nil {
			mine[tg.Endpoint.Name] = tg.Name
		}
	}
	if len(mine) == 0 {
		return nil
	}
	jobs, err := st.Jobs(nil)
	if err != nil {
		return fmt.Errorf("job register %q: read jobs: %w", job.ID, err)
	}
	for _, other := range jobs {
		if other == nil || other.ID == job.ID || other.Namespace != job.Namespace || other.Stop || other.Status == structs.JobStatusDead {
			continue
		}
		for _, tg := range other.TaskGroups {
			if tg == nil || tg.Endpoint == nil {
				continue
			}
			if group, dup := mine[tg.Endpoint.Name]; dup {
				return fmt.Errorf("%w: group %q: endpoint: name: %q is already declared by live job %q (group %q) in namespace %q; stop that job or choose another name",
					structs.ErrEndpointConflict, group, tg.Endpoint.Name, other.ID, tg.Name, job.Namespace)
			}
		}
	}
	return nil
}
