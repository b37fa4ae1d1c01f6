package http

import (
	"strings"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/server/servertest"
)

// TestJobCountLimit_RealServer checks that a real server refuses a group
// count above structs.MaxGroupCount with 400 and the group and field named,
// both when planning (job plan) and when registering, and stores nothing.
func TestJobCountLimit_RealServer(t *testing.T) {
	c := servertest.NewCluster(t, 1)
	c.WaitForLeader()
	ts := serve(t, routedServer{Server: c.Server(0), mu: &sync.Mutex{}, urls: map[string]string{}})
	body := strings.Replace(strings.ReplaceAll(realJobBody, "%s", "huge"), `"Count":1`, `"Count":1000000000`, 1)
	want := `group \"web\": count: must be at most 100000, got 1000000000`
	cases := []struct{ name, method, path string }{
		{"plan", "PUT", "/v1/job/huge/plan"},
		{"plan by POST", "POST", "/v1/job/huge/plan"},
		{"register", "PUT", "/v1/jobs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, got := doReq(t, tc.method, ts.URL+tc.path, body)
			if resp.StatusCode != 400 || !strings.Contains(got, want) {
				t.Fatalf("%s %s = %d %s, want 400 containing %s", tc.method, tc.path, resp.StatusCode, got, want)
			}
		})
	}
	if resp, got := doReq(t, "GET", ts.URL+"/v1/job/huge", ""); resp.StatusCode != 404 {
		t.Fatalf("job after refused register: %d %s", resp.StatusCode, got)
	}
}
