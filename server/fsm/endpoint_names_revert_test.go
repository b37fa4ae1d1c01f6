package fsm

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestExploitAutoRevertToATakenEndpointName: job x serves endpoint
// "llm-a" at version 0 and moves to "llm-b" at version 1, which frees
// "llm-a"; job y then registers "llm-a". Version 1's deployment fails
// with auto_revert: the rollback to version 0 went through the
// deployment entry, not a job register, so the FSM's endpoint name check
// never saw it and two live jobs declared "llm-a". The rollback is
// dropped (the deployment still fails) and the description says why.
func TestExploitAutoRevertToATakenEndpointName(t *testing.T) {
	tf := newTestFSM(t)
	s := tf.State()
	x := endpointJob("llm-a")
	x.ID, x.Name = "x", "x"
	if r := tf.applyMsg(t, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: x}); r != nil {
		t.Fatalf("register x v0: %v", r)
	}
	x1 := x.Copy()
	x1.TaskGroups[0].Endpoint.Name = "llm-b"
	if r := tf.applyMsg(t, 11, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: x1}); r != nil {
		t.Fatalf("register x v1: %v", r)
	}
	y := endpointJob("llm-a")
	y.ID, y.Name = "y", "y"
	if r := tf.applyMsg(t, 12, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: y}); r != nil {
		t.Fatalf("register y with the name x left: %v", r)
	}
	d := &structs.Deployment{ID: structs.GenerateUUID(), JobID: x.ID, JobVersion: 1, Status: structs.DeploymentStatusRunning,
		TaskGroups: map[string]*structs.DeploymentState{x.TaskGroups[0].Name: {DesiredTotal: 2, AutoRevert: true}}}
	if err := s.UpsertPlanResults(13, &structs.ApplyPlanResultsRequest{Deployment: d, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	v0, err := s.JobByIDAndVersion(nil, x.ID, 0)
	if err != nil || v0 == nil {
		t.Fatalf("x version 0: %v", err)
	}
	desc := structs.DeploymentStatusDescriptionRollback(structs.DeploymentStatusDescriptionFailedByUser, 0)
	if r := tf.applyMsg(t, 14, structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{
		DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusFailed, StatusDescription: desc},
		Job:              v0.Copy(), UpdatedAt: 2}); r != nil {
		t.Fatalf("apply: %v", r)
	}
	cur, _ := s.JobByID(nil, x.ID)
	if cur.Version != 1 || cur.TaskGroups[0].Endpoint.Name != "llm-b" {
		t.Fatalf("x after the revert = version %d endpoint %q, want version 1 on llm-b (llm-a is job y's)", cur.Version, cur.TaskGroups[0].Endpoint.Name)
	}
	got, _ := s.DeploymentByID(nil, d.ID)
	if got.Status != structs.DeploymentStatusFailed || !strings.Contains(got.StatusDescription, "not rolling back") || !strings.Contains(got.StatusDescription, `"y"`) {
		t.Fatalf("deployment = %s %q, want failed, saying it did not roll back because of job y", got.Status, got.StatusDescription)
	}
}
