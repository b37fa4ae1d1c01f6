package scheduler

import (
	"fmt"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// Stop descriptions of the deployment rules.
const (
	descCanaryOfFailed    = "canary of a failed deployment"
	descSurgeOfFailed     = "new allocation of a failed deployment"
	descReplacedByHealthy = "replaced by a healthy allocation of the new job version"
)

// deployPlan is what one evaluation does with the job's deployments: the
// deployment of the job's current version (an existing one, or a new one
// that joins the plan only when a placement or update uses it) and status
// updates of older deployments (cancelled by a newer version or a stopped
// job).
type deployPlan struct {
	d       *structs.Deployment
	isNew   bool
	used    bool
	updates []*structs.DeploymentStatusUpdate
}

// planDeployment decides, from the job and its newest deployment, which
// deployment the evaluation works with. An active deployment of another
// version (or of a stopped or removed job) is cancelled. A job without a
// rolling group (structs.UpdateStrategy.Rolling) or a batch job gets
// none; a version whose deployment was cancelled gets no new one.
func planDeployment(job *structs.Job, latest *structs.Deployment) *deployPlan {
	dp := &deployPlan{}
	if latest.Active() && (job == nil || job.Stop || !latest.ForJob(job)) {
		desc := structs.DeploymentStatusDescriptionNewerJob
		if job == nil || job.Stop {
			desc = structs.DeploymentStatusDescriptionStoppedJob
		}
		dp.updates = append(dp.updates, &structs.DeploymentStatusUpdate{
			DeploymentID: latest.ID, Status: structs.DeploymentStatusCancelled, StatusDescription: desc})
	}
	if job == nil || job.Stop || job.Type != structs.JobTypeService || !hasRollingGroup(job) {
		return dp
	}
	if latest.ForJob(job) {
		// A successful deployment still orders the slots (the last old
		// allocation gives way to the healthy new ones), a cancelled one
		// no longer does.
		if latest.Status != structs.DeploymentStatusCancelled {
			dp.d = latest
		}
		return dp
	}
	d := &structs.Deployment{
		ID: structs.GenerateUUID(), Namespace: job.Namespace, JobID: job.ID,
		JobVersion: job.Version, JobModifyIndex: job.ModifyIndex, JobSpecModifyIndex: job.JobModifyIndex,
		JobCreateIndex: job.CreateIndex, TaskGroups: map[string]*structs.DeploymentState{},
		Status: structs.DeploymentStatusRunning, StatusDescription: structs.DeploymentStatusDescriptionRunning,
		EvalPriority: job.Priority,
	}
	for _, tg := range job.TaskGroups {
		if tg == nil || !tg.Update.Rolling() {
			continue
		}
		d.TaskGroups[tg.Name] = &structs.DeploymentState{
			AutoRevert: tg.Update.AutoRevert, AutoPromote: tg.Update.AutoPromote,
			ProgressDeadline: tg.Update.ProgressDeadline, DesiredTotal: tg.Count,
		}
	}
	dp.d, dp.isNew = d, true
	return dp
}

func hasRollingGroup(job *structs.Job) bool {
	for _, tg := range job.TaskGroups {
		if tg != nil && tg.Update.Rolling() {
			return true
		}
	}
	return false
}

// group returns the deployment rules for one group, or nil when the group
// is not part of the deployment.
func (dp *deployPlan) group(tg *structs.TaskGroup) *groupDeploy {
	if dp == nil || dp.d == nil || !tg.Update.Rolling() {
		return nil
	}
	st := dp.d.TaskGroups[tg.Name]
	if st == nil {
		return nil
	}
	return &groupDeploy{dp: dp, st: st, u: tg.Update}
}

// finish sets a new deployment's description once its groups are known.
func (dp *deployPlan) finish() {
	if dp == nil || !dp.isNew {
		return
	}
	for _, st := range dp.d.TaskGroups {
		if st.DesiredCanaries > 0 && !st.AutoPromote {
			dp.d.StatusDescription = structs.DeploymentStatusDescriptionRunningNeedsPromotion
			return
		}
		if st.DesiredCanaries > 0 {
			dp.d.StatusDescription = structs.DeploymentStatusDescriptionRunningAutoPromotion
		}
	}
}

// groupDeploy is one group's part of an evaluation's deployment.
type groupDeploy struct {
	dp *deployPlan
	st *structs.DeploymentState
	u  *structs.UpdateStrategy
	// inflight counts the deployment's live allocations of the group not
	// yet healthy; canaries its live unpromoted canaries; surging maps an
	// old allocation to the new one placed beside it (max_unavailable = 0)
	// that is not yet healthy.
	inflight int
	canaries []*structs.Allocation
	surging  map[string]bool
}

func (g *groupDeploy) id() string { return g.dp.d.ID }

func (g *groupDeploy) running() bool { return g.dp.d.Status == structs.DeploymentStatusRunning }

func (g *groupDeploy) failed() bool { return g.dp.d.Status == structs.DeploymentStatusFailed }

// canaryPhase reports whether the group's canaries wait for promotion.
func (g *groupDeploy) canaryPhase() bool { return g.st.DesiredCanaries > 0 && !g.st.Promoted }

// mayReplace reports whether old allocations may be replaced now: the
// deployment runs (or succeeded) and is past its canaries.
func (g *groupDeploy) mayReplace() bool {
	return (g.running() || g.dp.d.Status == structs.DeploymentStatusSuccessful) && !g.canaryPhase()
}

// holdAside sorts a live allocation of the current version out of the
// group's slot competition, returning true when it is held aside: an
// unpromoted canary, or a new allocation placed beside a live old one
// (max_unavailable = 0) that is not yet healthy. A failed deployment's
// held-aside allocations are stopped instead (res).
func (g *groupDeploy) holdAside(a *structs.Allocation, live map[string]bool, res *reconcileResult) bool {
	if a.DeploymentID != g.id() {
		return false
	}
	healthy := a.DeploymentStatus.IsHealthy()
	if !healthy {
		g.inflight++
	}
	switch {
	case a.DeploymentStatus.IsCanary() && !g.st.Promoted:
		if g.failed() {
			res.stops = append(res.stops, stopRequest{a, descCanaryOfFailed})
			return true
		}
		g.canaries = append(g.canaries, a)
		return true
	case !healthy && a.PreviousAllocation != "" && live[a.PreviousAllocation]:
		if g.failed() {
			res.stops = append(res.stops, stopRequest{a, descSurgeOfFailed})
			return true
		}
		if g.surging == nil {
			g.surging = map[string]bool{}
		}
		g.surging[a.PreviousAllocation] = true
		return true
	}
	return false
}

// budget is how many old allocations may start being replaced now:
// max_parallel less the deployment's allocations not yet healthy.
func (g *groupDeploy) budget() int { return max(0, g.u.MaxParallel-g.inflight) }

// placeCanaries appends the canaries still to place: DesiredCanaries less
// the live ones, named after the old allocations they will replace (held
// holds the group's slots).
func (g *groupDeploy) placeCanaries(tg *structs.TaskGroup, job *structs.Job, held map[int]*structs.Allocation, res *reconcileResult) {
	if !g.running() || !g.canaryPhase() {
		return
	}
	need := g.st.DesiredCanaries - len(g.canaries)
	taken := map[int]bool{}
	for _, c := range g.canaries {
		taken[c.Index()] = true
	}
	idxs := make([]int, 0, len(held))
	for idx := range held {
		idxs = append(idxs, idx)
	}
	sort.Ints(idxs)
	for _, idx := range idxs {
		if need <= 0 {
			break
		}
		if a := held[idx]; a == nil || taken[idx] || current(a, job, tg) {
			continue
		}
		res.places = append(res.places, placementRequest{tg: tg, index: idx, deploymentID: g.id(), canary: true})
		g.dp.used = true
		need--
	}
}

// current reports whether the allocation runs the job's current version or
// can be updated to it in place.
func current(a *structs.Allocation, job *structs.Job, tg *structs.TaskGroup) bool {
	return sameVersion(a, job) || placementUnaffected(a.Job, job, tg.Name)
}

// inplaceDeployment moves an allocation updated in place into the group's
// deployment: a healthy one stays healthy there (its tasks keep running
// unchanged), any other starts without a verdict.
func (g *groupDeploy) inplaceDeployment(u *structs.Allocation) {
	u.DeploymentID = g.id()
	if u.DeploymentStatus.IsHealthy() {
		ds := u.DeploymentStatus.Copy()
		ds.Canary = false
		u.DeploymentStatus = ds
	} else {
		u.DeploymentStatus = nil
	}
	g.dp.used = true
}

// failureNote words why a placement of the group's deployment waits.
func failureNote(req placementRequest) string {
	switch {
	case req.canary:
		return "the canary waits for room; the deployment's progress deadline starts once it is placed"
	case req.surge:
		return "max_unavailable = 0: the old allocation keeps running until a new one fits beside it"
	}
	return ""
}

// waitingDescription is a running deployment's description while a canary
// of the group cannot be placed.
func waitingDescription(group string, m *structs.AllocMetric) string {
	return fmt.Sprintf("Deployment is waiting: a canary of group %q cannot be placed yet (%s)", group, m.Explain())
}
