package deploymentwatcher

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestDecide(t *testing.T) {
	job := &structs.Job{ID: "web", Version: 3, CreateIndex: 1, JobModifyIndex: 30}
	dep := func(status string, st structs.DeploymentState) *structs.Deployment {
		s := st
		return &structs.Deployment{ID: "d", JobID: "web", JobVersion: 3, JobCreateIndex: 1, JobSpecModifyIndex: 30, Status: status,
			TaskGroups: map[string]*structs.DeploymentState{"web": &s}}
	}
	versions := []*structs.Job{{ID: "web", Version: 3, Priority: 53}, {ID: "web", Version: 2, Priority: 52},
		{ID: "web", Version: 1, Stable: true, Priority: 51}, {ID: "web", Version: 0, Stable: true, Priority: 50}}
	// v3 went back to v1's spec (an earlier auto_revert) and fails too.
	sameSpec := []*structs.Job{{ID: "web", Version: 3, Priority: 51}, versions[1], versions[2], versions[3]}
	cases := []struct {
		name     string
		d        *structs.Deployment
		job      *structs.Job
		versions []*structs.Job
		now      int64
		status   string
		desc     string
		revertTo int64 // -1: none
		promote  bool
	}{
		{"paused: nothing", dep(structs.DeploymentStatusPaused, structs.DeploymentState{UnhealthyAllocs: 1}), job, versions, 0, "", "", -1, false},
		{"another version: nothing", dep(structs.DeploymentStatusRunning, structs.DeploymentState{UnhealthyAllocs: 1}), &structs.Job{ID: "web", Version: 4, CreateIndex: 1, JobModifyIndex: 40}, versions, 0, "", "", -1, false},
		{"in progress: nothing", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, HealthyAllocs: 2, RequireProgressBy: 100, ProgressDeadline: 10}), job, versions, 100, "", "", -1, false},
		{"unhealthy fails", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, UnhealthyAllocs: 1}), job, versions, 0,
			structs.DeploymentStatusFailed, structs.DeploymentStatusDescriptionFailedAllocations, -1, false},
		{"unhealthy with auto_revert goes to the newest stable", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, UnhealthyAllocs: 1, AutoRevert: true}), job, versions, 0,
			structs.DeploymentStatusFailed, "Failed due to unhealthy allocations - rolling back to job version 1", 1, false},
		{"auto_revert to a stable version of the same spec does not revert", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, UnhealthyAllocs: 1, AutoRevert: true}), job, sameSpec, 0,
			structs.DeploymentStatusFailed, "Failed due to unhealthy allocations - not rolling back to stable job version 1 as current job has same specification", -1, false},
		{"auto_revert without a stable version", dep(structs.DeploymentStatusRunning, structs.DeploymentState{UnhealthyAllocs: 1, AutoRevert: true}), job, versions[:2], 0,
			structs.DeploymentStatusFailed, "Failed due to unhealthy allocations - no stable job version to auto revert to", -1, false},
		{"past the progress deadline", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, HealthyAllocs: 1, RequireProgressBy: 100, ProgressDeadline: 10}), job, versions, 101,
			structs.DeploymentStatusFailed, structs.DeploymentStatusDescriptionProgressDeadline, -1, false},
		{"a done group ignores its deadline", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, HealthyAllocs: 3, RequireProgressBy: 100, ProgressDeadline: 10}), job, versions, 101,
			structs.DeploymentStatusSuccessful, structs.DeploymentStatusDescriptionSuccessful, -1, false},
		{"healthy canaries awaiting promotion outlive the progress deadline", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, DesiredCanaries: 1, HealthyAllocs: 1, RequireProgressBy: 100, ProgressDeadline: 10, AutoRevert: true}), job, versions, 101,
			"", "", -1, false},
		{"unhealthy-short canaries fail at the progress deadline", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, DesiredCanaries: 2, HealthyAllocs: 1, RequireProgressBy: 100, ProgressDeadline: 10}), job, versions, 101,
			structs.DeploymentStatusFailed, structs.DeploymentStatusDescriptionProgressDeadline, -1, false},
		{"healthy canaries auto-promote", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 3, DesiredCanaries: 1, HealthyAllocs: 1, AutoPromote: true}), job, versions, 0, "", "", -1, true},
		{"canaries wait for a manual promotion", dep(structs.DeploymentStatusRunning, structs.DeploymentState{DesiredTotal: 1, DesiredCanaries: 1, HealthyAllocs: 1}), job, versions, 0, "", "", -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dec := Decide(tc.d, tc.job, tc.versions, tc.now)
			status, desc := "", ""
			if dec.Status != nil {
				status, desc = dec.Status.Status, dec.Status.StatusDescription
			}
			if status != tc.status || desc != tc.desc || dec.Promote != tc.promote {
				t.Fatalf("decision = %q %q promote %v, want %q %q promote %v", status, desc, dec.Promote, tc.status, tc.desc, tc.promote)
			}
			switch {
			case tc.revertTo < 0 && dec.Revert != nil:
				t.Fatalf("reverts to v%d", dec.Revert.Version)
			case tc.revertTo >= 0 && (dec.Revert == nil || dec.Revert.Version != uint64(tc.revertTo) || dec.Revert.Stable):
				t.Fatalf("revert = %+v, want version %d, not stable", dec.Revert, tc.revertTo)
			}
		})
	}
}
