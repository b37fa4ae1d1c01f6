package http

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// planningServer is the fake server plus the scheduling routes' methods.
type planningServer struct {
	*fakeServer
	planned *structs.Job
}

func (p *planningServer) JobPlan(ctx context.Context, job *structs.Job) (*structs.JobPlanResponse, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	p.planned = job
	return &structs.JobPlanResponse{Diff: []string{"+ Meta.k = \"v\""}, Groups: []*structs.GroupPlan{{Name: "gpu", Place: 1, Nodes: map[string]int{"laptop": 1}}}}, nil
}

func (p *planningServer) JobQueue(ctx context.Context) ([]*structs.JobQueueEntry, error) {
	return []*structs.JobQueueEntry{{JobID: "big", Priority: 80, Status: "blocked", Queued: map[string]int{"g": 2}, Reasons: map[string]string{"g": "2 nodes: not enough free devices (nvidia/gpu)"}}}, nil
}

func TestSchedulingRoutes(t *testing.T) {
	ps := &planningServer{fakeServer: newFakeServer()}
	h, err := New(Config{Server: ps, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	job := `{"Job": {"ID": "hello-gpu", "Type": "batch", "Priority": 50, "Datacenters": ["dc1"], "TaskGroups": [{"Name": "gpu", "Count": 1, "Gang": true, "Tasks": [{"Name": "main", "Driver": "native", "Resources": {"CPU": 100, "MemoryMB": 64, "Devices": [{"Name": "nvidia/gpu", "Count": 1, "MemoryMB": 2048}]}}]}]}}`
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"plan", "PUT", "/v1/job/hello-gpu/plan", job, 200, `"Place": 1`},
		{"plan by POST", "POST", "/v1/job/hello-gpu/plan", job, 200, `"laptop": 1`},
		{"plan with mismatched ID", "PUT", "/v1/job/other/plan", job, 400, `does not match`},
		{"plan without job", "PUT", "/v1/job/hello-gpu/plan", `{}`, 400, `no Job`},
		{"plan with bad JSON", "PUT", "/v1/job/hello-gpu/plan", `{"Job": [`, 400, ``},
		{"plan of an invalid job", "PUT", "/v1/job/x/plan", `{"Job": {"ID": "x", "Type": "batch", "Priority": 50, "TaskGroups": [{"Name": "g", "Count": 1, "Availability": "sometimes", "Tasks": [{"Name": "t", "Driver": "native"}]}]}}`, 400, `availability`},
		{"queue", "GET", "/v1/jobs/queue", "", 200, `not enough free devices`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %s, want %d containing %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
	if ps.planned == nil || !ps.planned.TaskGroups[0].Gang || ps.planned.TaskGroups[0].Tasks[0].Resources.Devices[0].MemoryMB != 2048 {
		t.Fatalf("planned job did not carry gang and memory share: %+v", ps.planned)
	}
	var q []map[string]interface{}
	_, body := doReq(t, "GET", ts.URL+"/v1/jobs/queue", "")
	if err := json.Unmarshal([]byte(body), &q); err != nil || len(q) != 1 || q[0]["JobID"] != "big" {
		t.Fatalf("queue body %s: %v", body, err)
	}
}

func TestSchedulingRoutesUnsupported(t *testing.T) {
	_, _, ts := fixture(t)
	resp, body := doReq(t, "GET", ts.URL+"/v1/jobs/queue", "")
	if resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("queue on a server without scheduling routes: %d %s", resp.StatusCode, body)
	}
}
