package convert

import (
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

func updateToStructs(u *api.UpdateStrategy) *structs.UpdateStrategy {
	if u == nil {
		return nil
	}
	out := &structs.UpdateStrategy{
		MaxParallel: u.MaxParallel, HealthCheck: u.HealthCheck, MinHealthyTime: u.MinHealthyTime,
		HealthyDeadline: u.HealthyDeadline, ProgressDeadline: u.ProgressDeadline, AutoRevert: u.AutoRevert,
		AutoPromote: u.AutoPromote, Canary: u.Canary,
	}
	if u.MaxUnavailable != nil {
		m := *u.MaxUnavailable
		out.MaxUnavailable = &m
	}
	return out
}

func updateFromStructs(u *structs.UpdateStrategy) *api.UpdateStrategy {
	if u == nil {
		return nil
	}
	out := &api.UpdateStrategy{
		MaxParallel: u.MaxParallel, HealthCheck: u.HealthCheck, MinHealthyTime: u.MinHealthyTime,
		HealthyDeadline: u.HealthyDeadline, ProgressDeadline: u.ProgressDeadline, AutoRevert: u.AutoRevert,
		AutoPromote: u.AutoPromote, Canary: u.Canary,
	}
	if u.MaxUnavailable != nil {
		m := *u.MaxUnavailable
		out.MaxUnavailable = &m
	}
	return out
}

// DeploymentFromStructs renders a deployment in Nomad's shape:
// RequireProgressBy as a time (zero before any placement), PlacedCanaries
// sorted.
func DeploymentFromStructs(d *structs.Deployment) *api.Deployment {
	if d == nil {
		return nil
	}
	out := &api.Deployment{
		ID: d.ID, Namespace: d.Namespace, JobID: d.JobID, JobVersion: d.JobVersion, JobModifyIndex: d.JobModifyIndex,
		JobSpecModifyIndex: d.JobSpecModifyIndex, JobCreateIndex: d.JobCreateIndex, IsMultiregion: d.IsMultiregion,
		TaskGroups: make(map[string]*api.DeploymentState, len(d.TaskGroups)), Status: d.Status,
		StatusDescription: d.StatusDescription, CreateIndex: d.CreateIndex, ModifyIndex: d.ModifyIndex,
		CreateTime: d.CreateTime, ModifyTime: d.ModifyTime,
	}
	for name, st := range d.TaskGroups {
		if st == nil {
			continue
		}
		s := &api.DeploymentState{
			PlacedCanaries: append([]string{}, st.PlacedCanaries...), AutoRevert: st.AutoRevert,
			ProgressDeadline: st.ProgressDeadline, Promoted: st.Promoted, DesiredCanaries: st.DesiredCanaries,
			DesiredTotal: st.DesiredTotal, PlacedAllocs: st.PlacedAllocs, HealthyAllocs: st.HealthyAllocs,
			UnhealthyAllocs: st.UnhealthyAllocs, AutoPromote: st.AutoPromote,
		}
		sort.Strings(s.PlacedCanaries)
		if st.RequireProgressBy != 0 {
			s.RequireProgressBy = time.Unix(0, st.RequireProgressBy).UTC()
		}
		out.TaskGroups[name] = s
	}
	return out
}

// DeploymentsFromStructs renders a list; never nil.
func DeploymentsFromStructs(ds []*structs.Deployment) []*api.Deployment {
	out := make([]*api.Deployment, 0, len(ds))
	for _, d := range ds {
		out = append(out, DeploymentFromStructs(d))
	}
	return out
}

func cloneBoolPtr(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}
