package state

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestDeploymentCountersEventsAndPruning checks that a plan's deployment
// is stored, that its counters follow its allocations (placed, healthy
// once, canaries, progress deadline from the newest placement or health),
// that each change publishes a Deployment event keyed by the job, and
// that a job keeps at most maxDeploymentsPerJob terminal deployments.
func TestDeploymentCountersEventsAndPruning(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	must(t, s.UpsertJob(1, job))
	node := statetest.Node(0)
	must(t, s.UpsertNode(2, node))
	d := &structs.Deployment{ID: structs.GenerateUUID(), JobID: job.ID, Status: structs.DeploymentStatusRunning,
		TaskGroups: map[string]*structs.DeploymentState{"web": {DesiredTotal: 2, DesiredCanaries: 1, ProgressDeadline: 1000}}}
	a, canary := statetest.Alloc(job, node), statetest.Alloc(job, node)
	a.DeploymentID, canary.DeploymentID = d.ID, d.ID
	canary.DeploymentStatus = &structs.AllocDeploymentStatus{Canary: true}
	sub := s.Events().Subscribe(2, structs.EventTopics{structs.TopicDeployment: {job.ID}})
	must(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{Deployment: d, AllocsPlaced: []*structs.Allocation{a, canary}, UpdatedAt: 50}))
	got, _ := s.DeploymentByID(nil, d.ID)
	st := got.TaskGroups["web"]
	if st.PlacedAllocs != 2 || len(st.PlacedCanaries) != 1 || st.PlacedCanaries[0] != canary.ID || st.RequireProgressBy != 1050 || got.CreateIndex != 3 {
		t.Fatalf("after placement: %+v (create index %d)", st, got.CreateIndex)
	}
	if b := nextBatch(t, sub); len(b.Events) == 0 || b.Events[0].Topic != structs.TopicDeployment || b.Events[0].Payload.Deployment == nil {
		t.Fatalf("no deployment event: %+v", b)
	}
	yes, no := true, false
	must(t, s.UpdateAllocsFromClient(4, []*structs.Allocation{{ID: canary.ID, ClientStatus: structs.AllocClientStatusRunning,
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &yes, Timestamp: 70}}}, 70))
	// A second verdict is ignored: health is decided once.
	must(t, s.UpdateAllocsFromClient(5, []*structs.Allocation{{ID: canary.ID, ClientStatus: structs.AllocClientStatusRunning,
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &no, Timestamp: 90}}}, 90))
	got, _ = s.DeploymentByID(nil, d.ID)
	st = got.TaskGroups["web"]
	ca, _ := s.AllocByID(nil, canary.ID)
	if st.HealthyAllocs != 1 || st.UnhealthyAllocs != 0 || st.RequireProgressBy != 1070 || !ca.DeploymentStatus.IsHealthy() || !ca.DeploymentStatus.Canary {
		t.Fatalf("after health: %+v, canary %+v", st, ca.DeploymentStatus)
	}
	must(t, s.PromoteDeployment(6, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true}))
	if got, _ := s.DeploymentByID(nil, d.ID); !got.TaskGroups["web"].Promoted || got.StatusDescription != structs.DeploymentStatusDescriptionRunning {
		t.Fatalf("after promotion: %+v", got)
	}
	if err := s.PromoteDeployment(7, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, Groups: []string{"nope"}}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("promote of an unknown group: %v", err)
	}
	if err := s.UpdateDeploymentStatus(8, &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: "exploded"}, 0); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("unknown status: %v", err)
	}
	must(t, s.UpdateDeploymentStatus(9, &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusSuccessful}, 100))
	if j, _ := s.JobByID(nil, job.ID); !j.Stable {
		t.Fatal("a successful deployment did not mark its job version stable")
	}
	idx := uint64(10)
	for i := 0; i < maxDeploymentsPerJob+3; i++ {
		idx++
		old := &structs.Deployment{ID: structs.GenerateUUID(), JobID: job.ID, Status: structs.DeploymentStatusFailed,
			TaskGroups: map[string]*structs.DeploymentState{}}
		must(t, s.UpsertPlanResults(idx, &structs.ApplyPlanResultsRequest{Deployment: old, UpdatedAt: int64(idx)}))
	}
	ds, _ := s.DeploymentsByJobID(nil, job.ID)
	if len(ds) != maxDeploymentsPerJob {
		t.Fatalf("kept %d deployments, want %d", len(ds), maxDeploymentsPerJob)
	}
	must(t, s.DeleteJob(100, job.ID))
	if ds, _ := s.DeploymentsByJobID(nil, job.ID); len(ds) != 0 {
		t.Fatalf("a purged job keeps %d deployments", len(ds))
	}
}
