package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// deploymentAPI serves a job "web" with two versions and one running
// deployment with a canary, and records the writes it gets.
func deploymentAPI(t *testing.T, writes *[]string) *httptest.Server {
	d := &api.Deployment{ID: "d1e2f3a4-0000-1111-2222-333344445555", JobID: "web", JobVersion: 1, Status: "running",
		StatusDescription: "Deployment is running but requires manual promotion",
		TaskGroups: map[string]*api.DeploymentState{"web": {DesiredTotal: 3, DesiredCanaries: 1, PlacedCanaries: []string{"c1"},
			PlacedAllocs: 1, HealthyAllocs: 1, RequireProgressBy: time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.Job{{ID: "web", Type: "service"}})
	})
	mux.HandleFunc("GET /v1/job/web/versions", func(w http.ResponseWriter, r *http.Request) {
		resp := api.JobVersionsResponse{Versions: []*api.Job{{ID: "web", Version: 1}, {ID: "web", Version: 0, Stable: true}}}
		if r.URL.Query().Get("diffs") == "true" {
			resp.Diffs = []*api.JobDiff{{Type: "Edited", Fields: []*api.FieldDiff{{Type: "Edited", Name: `TaskGroups["web"].Count`, Old: "2", New: "3"}}}}
		}
		json.NewEncoder(w).Encode(resp)
	})
	mux.HandleFunc("PUT /v1/job/web/revert", func(w http.ResponseWriter, r *http.Request) {
		var req api.JobRevertRequest
		json.NewDecoder(r.Body).Decode(&req)
		*writes = append(*writes, "revert "+req.JobID)
		json.NewEncoder(w).Encode(api.JobRegisterResponse{EvalID: "e1", Index: 9})
	})
	mux.HandleFunc("GET /v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.Deployment{}
		if strings.HasPrefix(d.ID, r.URL.Query().Get("prefix")) {
			out = append(out, d)
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("PUT /v1/deployment/promote/{id}", func(w http.ResponseWriter, r *http.Request) {
		var req api.DeploymentPromoteRequest
		json.NewDecoder(r.Body).Decode(&req)
		*writes = append(*writes, "promote "+r.PathValue("id")+" "+strings.Join(req.Groups, ","))
		json.NewEncoder(w).Encode(api.DeploymentUpdateResponse{EvalID: "e2", Index: 10})
	})
	mux.HandleFunc("PUT /v1/deployment/fail/{id}", func(w http.ResponseWriter, r *http.Request) {
		v := uint64(0)
		*writes = append(*writes, "fail "+r.PathValue("id"))
		json.NewEncoder(w).Encode(api.DeploymentUpdateResponse{EvalID: "e3", RevertedJobVersion: &v, Index: 11})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestJobHistoryRevertAndDeploymentCommands(t *testing.T) {
	var writes []string
	ts := deploymentAPI(t, &writes)
	r := runCmd(t, ts.URL, "job", "history", "-p", "web")
	if r.code != 0 || !strings.Contains(r.out, "Version     = 1") || !strings.Contains(r.out, "Stable      = true") ||
		!strings.Contains(r.out, `~ TaskGroups["web"].Count: 2 => 3`) {
		t.Fatalf("job history -p: %d\n%s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, ts.URL, "job", "history", "-version", "7", "web"); r.code != 1 || !strings.Contains(r.err, "no kept version 7") {
		t.Fatalf("job history -version 7: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "job", "revert", "-detach", "web", "x"); r.code != 1 || !strings.Contains(r.err, "VERSION: want a version number") {
		t.Fatalf("job revert web x: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "job", "revert", "-detach", "web", "0"); r.code != 0 || !strings.Contains(r.out, "reverted to version 0") {
		t.Fatalf("job revert: %d %s%s", r.code, r.out, r.err)
	}
	r = runCmd(t, ts.URL, "deployment", "list")
	if r.code != 0 || !strings.Contains(r.out, "d1e2f3a4") || !strings.Contains(r.out, "requires manual promotion") {
		t.Fatalf("deployment list: %d\n%s%s", r.code, r.out, r.err)
	}
	r = runCmd(t, ts.URL, "deployment", "status", "d1e2")
	if r.code != 0 || !strings.Contains(r.out, "Desired Canaries") || !strings.Contains(r.out, "2026-01-01T00:10:00Z") {
		t.Fatalf("deployment status: %d\n%s%s", r.code, r.out, r.err)
	}
	if r := runCmd(t, ts.URL, "deployment", "status", "zzz"); r.code != 1 || !strings.Contains(r.err, "No deployment with prefix") {
		t.Fatalf("deployment status of an unknown prefix: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "deployment", "promote", "-group", "web", "d1e2"); r.code != 0 {
		t.Fatalf("deployment promote: %d %s", r.code, r.err)
	}
	if r := runCmd(t, ts.URL, "deployment", "fail", "d1e2"); r.code != 0 || !strings.Contains(r.out, "rolling back to job version 0") {
		t.Fatalf("deployment fail: %d %s%s", r.code, r.out, r.err)
	}
	want := "revert web|promote d1e2f3a4-0000-1111-2222-333344445555 web|fail d1e2f3a4-0000-1111-2222-333344445555"
	if got := strings.Join(writes, "|"); got != want {
		t.Fatalf("writes = %q, want %q", got, want)
	}
}
