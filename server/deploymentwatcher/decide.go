// Package deploymentwatcher watches running deployments on the leader and
// decides their fate: success (which marks the job version stable),
// failure on an unhealthy allocation or a passed progress deadline (with
// auto_revert, registering the newest stable version again), automatic
// promotion of healthy canaries, and an evaluation whenever an allocation's
// health moved the rollout on. Every decision is a Raft entry; the FSM
// applies it. Decide is pure, so the state machine is tested as a table.
package deploymentwatcher

import (
	"sort"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// Decision is what Decide wants done with one deployment. At most one of
// Status and Promote is set.
type Decision struct {
	// Status, when set, changes the deployment's status (failed or
	// successful).
	Status *structs.DeploymentStatusUpdate
	// Revert, with a failure under auto_revert, is the job version to
	// register again (a copy of the newest stable version).
	Revert *structs.Job
	// Promote promotes every group whose canaries auto_promote and are
	// all healthy.
	Promote bool
}

// IsNoOp reports whether the decision changes nothing.
func (d Decision) IsNoOp() bool { return d.Status == nil && !d.Promote }

// Decide looks at deployment d of job (versions: the job's kept versions,
// newest first) at now, Unix nanoseconds:
//   - a deployment that is not running, or not of the job's current
//     version (the scheduler cancels those), is left alone;
//   - an unhealthy allocation in any group fails it ("Failed due to
//     unhealthy allocations");
//   - a group not yet done whose RequireProgressBy has passed fails it
//     ("Failed due to progress deadline"); a canary not yet placed starts
//     no deadline, and healthy canaries awaiting promotion stop it;
//   - a failure of a deployment with a group under auto_revert registers
//     the newest stable version other than the deployed one again, or says
//     there is none;
//   - groups whose canaries auto_promote and are all healthy are
//     promoted;
//   - once every group is done (canaries promoted, HealthyAllocs at least
//     DesiredTotal) it is successful.
func Decide(d *structs.Deployment, job *structs.Job, versions []*structs.Job, now int64) Decision {
	if d == nil || d.Status != structs.DeploymentStatusRunning || !d.ForJob(job) {
		return Decision{}
	}
	names := make([]string, 0, len(d.TaskGroups))
	for name := range d.TaskGroups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if st := d.TaskGroups[name]; st.UnhealthyAllocs > 0 {
			return Fail(d, versions, structs.DeploymentStatusDescriptionFailedAllocations)
		}
	}
	for _, name := range names {
		st := d.TaskGroups[name]
		if !groupDone(st) && !awaitingPromotion(st) && st.ProgressDeadline > 0 && st.RequireProgressBy > 0 && now > st.RequireProgressBy {
			return Fail(d, versions, structs.DeploymentStatusDescriptionProgressDeadline)
		}
	}
	done := true
	for _, name := range names {
		st := d.TaskGroups[name]
		if st.DesiredCanaries > 0 && !st.Promoted && st.AutoPromote && st.HealthyAllocs >= st.DesiredCanaries {
			return Decision{Promote: true}
		}
		done = done && groupDone(st)
	}
	if done {
		return Decision{Status: &structs.DeploymentStatusUpdate{DeploymentID: d.ID,
			Status: structs.DeploymentStatusSuccessful, StatusDescription: structs.DeploymentStatusDescriptionSuccessful}}
	}
	return Decision{}
}

// awaitingPromotion reports whether a group's canaries are all healthy
// and wait for a promotion: its progress deadline no longer runs (as
// Nomad's), so a manual promotion may come any time.
func awaitingPromotion(st *structs.DeploymentState) bool {
	return st.DesiredCanaries > 0 && !st.Promoted && st.HealthyAllocs >= st.DesiredCanaries
}

// groupDone reports whether a group's rollout is complete.
func groupDone(st *structs.DeploymentState) bool {
	return (st.DesiredCanaries == 0 || st.Promoted) && st.HealthyAllocs >= st.DesiredTotal
}

// Fail is the decision that fails d with desc: with a group under
// auto_revert, the newest stable version in versions (newest first) other
// than the deployed one is registered again.
func Fail(d *structs.Deployment, versions []*structs.Job, desc string) Decision {
	out := Decision{Status: &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusFailed, StatusDescription: desc}}
	revert := false
	for _, st := range d.TaskGroups {
		revert = revert || st.AutoRevert
	}
	if !revert {
		return out
	}
	var deployed *structs.Job
	for _, v := range versions {
		if v.Version == d.JobVersion {
			deployed = v
		}
	}
	for _, v := range versions {
		if v.Stable && v.Version != d.JobVersion {
			if deployed != nil && !state.JobSpecChanged(deployed, v) {
				// The failed version already is that spec (an earlier
				// revert): registering it again would change nothing, so
				// say so rather than claim a rollback (as Nomad).
				out.Status.StatusDescription = structs.DeploymentStatusDescriptionSameSpec(desc, v.Version)
				return out
			}
			j := v.Copy()
			j.Stop, j.Stable = false, false
			out.Revert = j
			out.Status.StatusDescription = structs.DeploymentStatusDescriptionRollback(desc, v.Version)
			return out
		}
	}
	out.Status.StatusDescription = structs.DeploymentStatusDescriptionNoRollback(desc)
	return out
}
