package fsm

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestApplyGCPurge applies GC purge entries through the Raft FSM: a purge
// naming the job's current ModifyIndex removes it and its evaluation, one
// naming an older index changes nothing, and a malformed one is refused.
func TestApplyGCPurge(t *testing.T) {
	cases := []struct {
		name       string
		entry      func(jobIdx uint64, job *structs.Job, eval *structs.Evaluation) *structs.GCPurgeRequest
		wantErr    error
		wantJobNow bool
	}{
		{
			name: "current index purges",
			entry: func(jobIdx uint64, job *structs.Job, eval *structs.Evaluation) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{{JobID: job.ID, ModifyIndex: jobIdx, Evals: []string{eval.ID}}}}
			},
		},
		{
			name: "stale index keeps the job",
			entry: func(jobIdx uint64, job *structs.Job, eval *structs.Evaluation) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{{JobID: job.ID, ModifyIndex: jobIdx - 1, Evals: []string{eval.ID}}}}
			},
			wantJobNow: true,
		},
		{
			name: "entry without job ID is refused",
			entry: func(uint64, *structs.Job, *structs.Evaluation) *structs.GCPurgeRequest {
				return &structs.GCPurgeRequest{Jobs: []*structs.GCJobPurge{{}}}
			},
			wantErr:    structs.ErrInvalid,
			wantJobNow: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tf := newTestFSM(t)
			job := statetest.BatchJob(0)
			eval := statetest.Eval(job)
			eval.Status = structs.EvalStatusComplete
			if resp := tf.applyMsg(t, 1, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: eval}); resp != nil {
				t.Fatalf("register: %v", resp)
			}
			before := tf.hash(t)
			resp := tf.applyMsg(t, 2, structs.GCPurgeRequestType, c.entry(1, job, eval))
			if err, _ := resp.(error); !errors.Is(err, c.wantErr) || (c.wantErr == nil && resp != nil) {
				t.Fatalf("response = %v, want %v", resp, c.wantErr)
			}
			j, err := tf.State().JobByID(nil, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			e, err := tf.State().EvalByID(nil, eval.ID)
			if err != nil {
				t.Fatal(err)
			}
			if (j != nil) != c.wantJobNow || (e != nil) != c.wantJobNow {
				t.Fatalf("job present %v, eval present %v, want %v", j != nil, e != nil, c.wantJobNow)
			}
			if c.wantJobNow && tf.hash(t) != before {
				t.Fatal("an entry that purged nothing changed the state")
			}
		})
	}
}
