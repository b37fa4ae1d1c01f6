package convert

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// TestDeploymentReads checks the renderings of issue 13's reads: a plan
// keeps its rollout notes, a deployment its RequireProgressBy as a time
// (zero before a placement), an allocation its health with an RFC 3339
// time, and a job its update block and stability.
func TestDeploymentReads(t *testing.T) {
	plan := PlanRead("web", &structs.JobPlanResponse{Groups: []*structs.GroupPlan{{Name: "g", Queued: 1,
		Notes: []string{"no room for a new copy beside the old ones: nothing stops until there is room"}}}})
	if len(plan.Groups) != 1 || len(plan.Groups[0].Notes) != 1 {
		t.Fatalf("plan notes lost: %+v", plan.Groups)
	}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	d := DeploymentFromStructs(&structs.Deployment{ID: "d", TaskGroups: map[string]*structs.DeploymentState{
		"a": {RequireProgressBy: at.UnixNano(), PlacedCanaries: []string{"z", "y"}}, "b": {}}})
	if !d.TaskGroups["a"].RequireProgressBy.Equal(at) || !d.TaskGroups["b"].RequireProgressBy.IsZero() || d.TaskGroups["a"].PlacedCanaries[0] != "y" {
		t.Fatalf("deployment = %+v %+v", d.TaskGroups["a"], d.TaskGroups["b"])
	}
	yes := true
	a := AllocRead(&structs.Allocation{ID: "x", DeploymentID: "d", ModifyIndex: 7,
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &yes, Timestamp: at.UnixNano(), Canary: true}}, "global", false)
	if a.DeploymentID != "d" || a.DeploymentStatus == nil || !*a.DeploymentStatus.Healthy || !a.DeploymentStatus.Timestamp.Equal(at) ||
		!a.DeploymentStatus.Canary || a.DeploymentStatus.ModifyIndex != 7 {
		t.Fatalf("alloc deployment status = %+v", a.DeploymentStatus)
	}
	b := EventBatchRead(&structs.EventBatch{Index: 3, Events: []*structs.Event{{Topic: structs.TopicDeployment, Type: structs.EventDeploymentStatusUpdate,
		Key: "d", Index: 3, Payload: structs.EventPayload{Deployment: &structs.Deployment{ID: "d", Namespace: "ml"}}}}}, "global")
	if raw := b.Events[0].Payload["Deployment"]; len(raw) == 0 || b.Events[0].Namespace != "ml" {
		t.Fatalf("deployment event = %+v", b.Events[0])
	}
	zero := 0
	j := JobRead(&structs.Job{ID: "web", Stable: true, TaskGroups: []*structs.TaskGroup{{Name: "g",
		Update: &structs.UpdateStrategy{MaxParallel: 1, MaxUnavailable: &zero, MinHealthyTime: time.Minute}}}}, "global")
	u := j.TaskGroups[0].Update
	if !j.Stable || u == nil || u.MaxParallel != 1 || u.MaxUnavailable == nil || *u.MaxUnavailable != 0 || u.MinHealthyTime != time.Minute {
		t.Fatalf("job read = stable %v update %+v", j.Stable, u)
	}
	back := JobToStructs(j)
	if bu := back.TaskGroups[0].Update; bu == nil || bu.MaxUnavailable == nil || *bu.MaxUnavailable != 0 {
		t.Fatalf("job to structs: update %+v", bu)
	}
}

// TestEventAllocationWithoutJob: an allocation event renders without the
// job, though the state's event holds the stored allocation, job pointer
// and all (state.eventFromChange).
func TestEventAllocationWithoutJob(t *testing.T) {
	b := EventBatchRead(&structs.EventBatch{Index: 3, Events: []*structs.Event{{Topic: structs.TopicAllocation, Type: structs.EventAllocationUpdated,
		Key: "a", Index: 3, Payload: structs.EventPayload{Allocation: &structs.Allocation{ID: "a", JobID: "web",
			Job: &structs.Job{ID: "web", Namespace: "ml", Meta: map[string]string{"secret-ish": "job body"}}}}}}}, "global")
	raw := string(b.Events[0].Payload["Allocation"])
	if raw == "" || strings.Contains(raw, "job body") || strings.Contains(raw, `"Job":{`) {
		t.Fatalf("allocation event renders its job: %s", raw)
	}
}

// TestEventPayloadsOfServicesAndAliases: service registration and endpoint
// alias events carry their object under the topic's payload key (a service
// event once went out with an empty payload).
func TestEventPayloadsOfServicesAndAliases(t *testing.T) {
	b := EventBatchRead(&structs.EventBatch{Index: 9, Events: []*structs.Event{
		{Topic: structs.TopicService, Type: structs.EventServiceRegistration, Key: "web", Index: 9,
			Payload: structs.EventPayload{Service: &structs.ServiceRegistration{ID: "svc-1", ServiceName: "web", Namespace: "ml", Port: 8080}}},
		{Topic: structs.TopicEndpointAlias, Type: structs.EventEndpointAliasPromoted, Key: "llm.primary", Index: 9,
			Payload: structs.EventPayload{EndpointAlias: &structs.EndpointAlias{Name: "llm.primary", Endpoint: "llm-70b", Namespace: "ml", PromotedAt: 1_700_000_000_000_000_000}}},
	}}, "global")
	var svc api.ServiceRegistration
	if err := json.Unmarshal(b.Events[0].Payload["Service"], &svc); err != nil || svc.ServiceName != "web" || svc.Port != 8080 || b.Events[0].Namespace != "ml" {
		t.Fatalf("service event = %+v payload %s (%v)", b.Events[0], b.Events[0].Payload["Service"], err)
	}
	var al api.EndpointAlias
	if err := json.Unmarshal(b.Events[1].Payload["EndpointAlias"], &al); err != nil || al.Endpoint != "llm-70b" || al.PromotedAt.IsZero() || b.Events[1].Namespace != "ml" {
		t.Fatalf("alias event = %+v payload %s (%v)", b.Events[1], b.Events[1].Payload["EndpointAlias"], err)
	}
}
