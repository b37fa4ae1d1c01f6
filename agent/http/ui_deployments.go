package http

import (
	"net/http"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// versionRow is one kept job version on the job page.
type versionRow struct {
	Version   uint64
	Stable    bool
	Current   bool
	Submitted string
	// Changes are the version's diff against the one before it, one line
	// each; empty for the oldest kept version.
	Changes []string
}

// deploymentView is the job's newest deployment on the job page.
type deploymentView struct {
	ID, Short, Status, Description string
	JobVersion                     uint64
	Active, NeedsPromotion         bool
	Groups                         []deploymentGroupRow
}

// deploymentGroupRow is one group of a deployment.
type deploymentGroupRow struct {
	Name                                string
	Desired, Placed, Healthy, Unhealthy int
	DesiredCanaries, PlacedCanaries     int
	Promoted, AutoRevert                bool
	RequireProgressBy                   string
}

// jobDeploymentViews fills the job page's versions and latest deployment
// from a server that keeps them (a test fake may not).
func (u *ui) jobDeploymentViews(r *http.Request, v *jobView, job *structs.Job, q *structs.QueryOptions) {
	ctx := r.Context()
	if vs, ok := u.h.srv.(JobVersionServer); ok {
		if versions, _, err := vs.JobVersions(ctx, job.ID, q); err == nil {
			for i, j := range versions {
				row := versionRow{Version: j.Version, Stable: j.Stable, Current: j.Version == job.Version, Submitted: fmtNanoTime(j.SubmitTime)}
				if i+1 < len(versions) {
					row.Changes = structs.JobDiff(versions[i+1], j)
				}
				v.Versions = append(v.Versions, row)
			}
		}
	}
	ds, ok := u.h.srv.(DeploymentServer)
	if !ok {
		return
	}
	list, _, err := ds.JobDeployments(ctx, job.ID, q)
	// Deployments the job made in another namespace it moved from are
	// shown only to callers that may read that one.
	list = visible(r, list, structs.NamespaceCapabilityReadJob, deploymentNamespace)
	if err != nil || len(list) == 0 {
		return
	}
	d := list[0]
	dv := &deploymentView{ID: d.ID, Short: shortID(d.ID), Status: d.Status, Description: d.StatusDescription,
		JobVersion: d.JobVersion, Active: d.Active(), NeedsPromotion: d.Status == structs.DeploymentStatusRunning && d.RequiresPromotion()}
	names := make([]string, 0, len(d.TaskGroups))
	for n := range d.TaskGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := d.TaskGroups[n]
		row := deploymentGroupRow{Name: n, Desired: st.DesiredTotal, Placed: st.PlacedAllocs, Healthy: st.HealthyAllocs,
			Unhealthy: st.UnhealthyAllocs, DesiredCanaries: st.DesiredCanaries, PlacedCanaries: len(st.PlacedCanaries),
			Promoted: st.Promoted, AutoRevert: st.AutoRevert, RequireProgressBy: "not started"}
		if st.RequireProgressBy != 0 {
			row.RequireProgressBy = fmtNanoTime(st.RequireProgressBy)
		}
		dv.Groups = append(dv.Groups, row)
	}
	v.Deployment = dv
}
