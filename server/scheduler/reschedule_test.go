package scheduler

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

func TestReconcileReschedulePolicy(t *testing.T) {
	mk := func(typ string, rp *structs.ReschedulePolicy) *structs.Job {
		return &structs.Job{ID: "j", Type: typ, JobModifyIndex: 1, TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1, ReschedulePolicy: rp, Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	}
	failedAt := func(job *structs.Job, id string, create uint64, at time.Duration) *structs.Allocation {
		return &structs.Allocation{ID: id, Name: structs.AllocName("j", "g", 0), JobID: "j", Job: job, TaskGroup: "g",
			DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusFailed,
			CreateIndex: create, ModifyTime: int64(at)}
	}
	hour := time.Hour
	cases := []struct {
		name     string
		typ      string
		rp       *structs.ReschedulePolicy
		failures []time.Duration // ModifyTime of each failed allocation, oldest first
		replace  bool
	}{
		{"batch without policy is kept", structs.JobTypeBatch, nil, []time.Duration{hour}, false},
		{"batch first failure rescheduled", structs.JobTypeBatch, &structs.ReschedulePolicy{Attempts: 1, Interval: hour}, []time.Duration{hour}, true},
		{"batch second failure kept", structs.JobTypeBatch, &structs.ReschedulePolicy{Attempts: 1, Interval: hour}, []time.Duration{hour, hour + time.Minute}, false},
		{"old failure outside the interval", structs.JobTypeBatch, &structs.ReschedulePolicy{Attempts: 1, Interval: hour}, []time.Duration{0, 3 * hour}, true},
		{"interval 0 counts every failure", structs.JobTypeBatch, &structs.ReschedulePolicy{Attempts: 1}, []time.Duration{0, 30 * hour}, false},
		{"service with 0 attempts kept", structs.JobTypeService, &structs.ReschedulePolicy{Attempts: 0, Interval: hour}, []time.Duration{hour}, false},
		{"service unlimited", structs.JobTypeService, &structs.ReschedulePolicy{Unlimited: true}, []time.Duration{1, 2, 3, 4}, true},
		{"service without policy replaced", structs.JobTypeService, nil, []time.Duration{1, 2, 3}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := mk(tc.typ, tc.rp)
			var allocs []*structs.Allocation
			for i, at := range tc.failures {
				allocs = append(allocs, failedAt(job, string(rune('a'+i)), uint64(i+1), at))
			}
			res := reconcile(job, allocs, 0)
			if got := len(res.places) == 1; got != tc.replace {
				t.Fatalf("replaced %v (places %d), want %v", got, len(res.places), tc.replace)
			}
			if tc.replace && tc.rp != nil && res.places[0].previous != allocs[len(allocs)-1] {
				t.Fatalf("replacement names %v, want the newest failed allocation", res.places[0].previous)
			}
		})
	}
}
