package http

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server/servertest"
)

// TestDeploymentRoutes_RealServer registers a rolling job on a real
// server (no nodes: its allocations wait, its deployment runs), reads the
// deployment in Nomad's shape, and checks each write route's bad input
// and its pause, resume and fail.
func TestDeploymentRoutes_RealServer(t *testing.T) {
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	ts := serve(t, routedServer{Server: c.Server(0), mu: &sync.Mutex{}, urls: map[string]string{}})
	body := strings.Replace(strings.ReplaceAll(realJobBody, "%s", "roll"), `"Count":1,`, `"Count":3,"Update":{"MaxParallel":1},`, 1)
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/jobs", body); resp.StatusCode != 200 {
		t.Fatalf("register: %d %s", resp.StatusCode, got)
	}
	var d api.Deployment
	waittest.For(t, 10*time.Second, "the job's deployment", func() (bool, string) {
		resp, got := doReq(t, "GET", ts.URL+"/v1/job/roll/deployment", "")
		if resp.StatusCode != 200 || got == "null" {
			return false, got
		}
		return json.Unmarshal([]byte(got), &d) == nil && d.ID != "", got
	})
	if st := d.TaskGroups["web"]; d.Status != "running" || st == nil || st.DesiredTotal != 3 || !st.RequireProgressBy.IsZero() {
		t.Fatalf("deployment = %+v", d)
	}
	resp, got := doReq(t, "GET", ts.URL+"/v1/deployments", "")
	var list []*api.Deployment
	if err := json.Unmarshal([]byte(got), &list); err != nil || resp.StatusCode != 200 || len(list) != 1 || list[0].ID != d.ID {
		t.Fatalf("list: %d %s", resp.StatusCode, got)
	}
	id := d.ID
	// The job page shows the deployment, with its actions, and the
	// versions.
	page := getPage(t, ts.URL+"/ui/job/roll")
	for _, want := range []string{`id="job-deployment"`, `data-action="fail-deployment" data-deployment="` + id + `"`, "Deployment is running", "v0 (current)"} {
		if !strings.Contains(page, want) {
			t.Fatalf("job page lacks %q", want)
		}
	}
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/jobs", strings.Replace(body, `"Count":3`, `"Count":2`, 1)); resp.StatusCode != 200 {
		t.Fatalf("register v1: %d %s", resp.StatusCode, got)
	}
	waittest.For(t, 10*time.Second, "the job page lists both versions", func() (bool, string) {
		page := getPage(t, ts.URL+"/ui/job/roll")
		return strings.Contains(page, `data-action="revert-job" data-job="roll" data-version="0"`) && strings.Contains(page, "v1 (current)") &&
			strings.Contains(page, `~ TaskGroups[&#34;web&#34;].Count: 3 =&gt; 2`), "versions not shown yet"
	})
	waittest.For(t, 10*time.Second, "the deployment of version 1", func() (bool, string) {
		_, got := doReq(t, "GET", ts.URL+"/v1/job/roll/deployment", "")
		return json.Unmarshal([]byte(got), &d) == nil && d.JobVersion == 1, got
	})
	id = d.ID
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"promote other ID", "PUT", "/v1/deployment/promote/" + id, `{"DeploymentID":"other","All":true}`, 400, "does not match"},
		{"promote nothing", "PUT", "/v1/deployment/promote/" + id, `{}`, 400, "name the groups to promote or set All"},
		{"promote without canaries", "PUT", "/v1/deployment/promote/" + id, `{"All":true}`, 400, "no canaries to promote"},
		{"promote garbage", "PUT", "/v1/deployment/promote/" + id, `{"All":`, 400, ""},
		{"health without IDs", "PUT", "/v1/deployment/allocation-health/" + id, `{}`, 400, "HealthyAllocationIDs"},
		{"health of unknown alloc", "PUT", "/v1/deployment/allocation-health/" + id, `{"HealthyAllocationIDs":["nope"]}`, 404, "nope"},
		{"fail unknown", "PUT", "/v1/deployment/fail/nope", ``, 404, "nope"},
		{"get unknown", "GET", "/v1/deployment/nope", ``, 404, "nope"},
		{"pause", "PUT", "/v1/deployment/pause/" + id, `{"Pause":true}`, 200, ""},
		{"resume", "PUT", "/v1/deployment/pause/" + id, `{"Pause":false}`, 200, "EvalID"},
		{"fail", "PUT", "/v1/deployment/fail/" + id, ``, 200, "EvalID"},
		{"fail again", "PUT", "/v1/deployment/fail/" + id, ``, 400, "not running or paused"},
	} {
		resp, got := doReq(t, tc.method, ts.URL+tc.path, tc.body)
		if resp.StatusCode != tc.code || !strings.Contains(got, tc.want) {
			t.Fatalf("%s: %d %s, want %d containing %q", tc.name, resp.StatusCode, got, tc.code, tc.want)
		}
	}
	_, got = doReq(t, "GET", ts.URL+"/v1/deployment/"+id, "")
	if err := json.Unmarshal([]byte(got), &d); err != nil || d.Status != "failed" || d.StatusDescription != "Deployment marked as failed - no stable job version to auto revert to" && d.StatusDescription != "Deployment marked as failed" {
		t.Fatalf("after fail: %s", got)
	}
}
