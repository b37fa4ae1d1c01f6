package http

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server/servertest"
)

// TestJobVersionsAndRevert_RealServer registers three versions of a job,
// reads them with diffs in Nomad's shape, reverts to version 0 and checks
// the revert is a new version with version 0's spec; reverting to the
// current version, to a version not kept, and with a wrong
// EnforcePriorVersion are refused.
func TestJobVersionsAndRevert_RealServer(t *testing.T) {
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	ts := serve(t, routedServer{Server: c.Server(0), mu: &sync.Mutex{}, urls: map[string]string{}})
	body := strings.ReplaceAll(realJobBody, "%s", "hist")
	for _, count := range []string{`"Count":1`, `"Count":2`, `"Count":3`} {
		if resp, got := doReq(t, "PUT", ts.URL+"/v1/jobs", strings.Replace(body, `"Count":1`, count, 1)); resp.StatusCode != 200 {
			t.Fatalf("register %s: %d %s", count, resp.StatusCode, got)
		}
	}
	resp, got := doReq(t, "GET", ts.URL+"/v1/job/hist/versions?diffs=true", "")
	if resp.StatusCode != 200 {
		t.Fatalf("versions: %d %s", resp.StatusCode, got)
	}
	var vr api.JobVersionsResponse
	if err := json.Unmarshal([]byte(got), &vr); err != nil {
		t.Fatal(err)
	}
	if len(vr.Versions) != 3 || vr.Versions[0].Version != 2 || vr.Versions[2].Version != 0 || len(vr.Diffs) != 2 {
		t.Fatalf("versions = %s", got)
	}
	d := vr.Diffs[0]
	if d.Type != "Edited" || len(d.Fields) != 1 || d.Fields[0].Name != `TaskGroups["web"].Count` || d.Fields[0].Old != "2" || d.Fields[0].New != "3" {
		t.Fatalf("diff v1->v2 = %+v", d.Fields[0])
	}
	for _, tc := range []struct{ name, body, want string }{
		{"current version", `{"JobID":"hist","JobVersion":2}`, "is the current version"},
		{"unknown version", `{"JobID":"hist","JobVersion":9}`, `job \"hist\" has no version 9 kept (the servers keep its last 6 versions and its newest stable one; gpulayer job history hist lists them)`},
		{"wrong prior version", `{"JobID":"hist","JobVersion":0,"EnforcePriorVersion":1}`, "EnforcePriorVersion"},
		{"other job in body", `{"JobID":"other","JobVersion":0}`, "does not match"},
	} {
		resp, got := doReq(t, "PUT", ts.URL+"/v1/job/hist/revert", tc.body)
		if resp.StatusCode/100 != 4 || !strings.Contains(got, tc.want) {
			t.Fatalf("%s: %d %s, want 4xx containing %q", tc.name, resp.StatusCode, got, tc.want)
		}
	}
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/job/hist/revert", `{"JobID":"hist","JobVersion":0,"EnforcePriorVersion":2}`); resp.StatusCode != 200 || !strings.Contains(got, "EvalID") {
		t.Fatalf("revert: %d %s", resp.StatusCode, got)
	}
	resp, got = doReq(t, "GET", ts.URL+"/v1/job/hist", "")
	var job api.Job
	if err := json.Unmarshal([]byte(got), &job); err != nil || resp.StatusCode != 200 {
		t.Fatalf("job: %d %s", resp.StatusCode, got)
	}
	if job.Version != 3 || job.TaskGroups[0].Count != 1 {
		t.Fatalf("after revert: version %d count %d, want 3 and 1", job.Version, job.TaskGroups[0].Count)
	}
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/job/hist/stable", `{"JobVersion":3,"Stable":true}`); resp.StatusCode != 200 {
		t.Fatalf("stable: %d %s", resp.StatusCode, got)
	}
	if resp, got := doReq(t, "GET", ts.URL+"/v1/job/nope/versions", ""); resp.StatusCode != 404 {
		t.Fatalf("versions of an unknown job: %d %s", resp.StatusCode, got)
	}
}
