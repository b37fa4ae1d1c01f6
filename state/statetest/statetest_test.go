package statetest

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestFixturesAreValid(t *testing.T) {
	for _, job := range []*structs.Job{Job(), BatchJob(0), BatchJob(2)} {
		if err := job.Validate(); err != nil {
			t.Errorf("job %s: %v", job.ID, err)
		}
	}
	cases := []struct {
		name     string
		gpus     int
		job      *structs.Job
		wantDevs int
	}{
		{"no gpus", 0, Job(), 0},
		{"two of four", 4, BatchJob(2), 2},
		{"ask more than there are", 1, BatchJob(2), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := Node(c.gpus)
			if !n.Ready() {
				t.Fatalf("node not ready: %s", n.Status)
			}
			got := 0
			if len(n.NodeResources.Devices) > 0 {
				got = len(n.NodeResources.Devices[0].HealthyInstances())
			}
			if got != c.gpus {
				t.Fatalf("healthy instances = %d, want %d", got, c.gpus)
			}
			a := Alloc(c.job, n)
			if a.NodeID != n.ID || a.JobID != c.job.ID || a.Index() != 0 {
				t.Fatalf("alloc = %+v", a)
			}
			if ids := a.DeviceIDs(); len(ids) != c.wantDevs {
				t.Fatalf("alloc devices = %v, want %d", ids, c.wantDevs)
			}
			if e := Eval(c.job); e.JobID != c.job.ID || e.Status != structs.EvalStatusPending {
				t.Fatalf("eval = %+v", e)
			}
		})
	}
	if first, second := Node(0), Node(0); first.ID == second.ID {
		t.Fatal("two nodes share an ID")
	}
}
