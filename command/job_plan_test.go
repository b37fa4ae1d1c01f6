package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// planAPI serves /v1/job/{id}/plan with plan and /v1/jobs/queue with
// queue, and records the planned job.
func planAPI(t *testing.T, plan *api.JobPlanResponse, queue []*api.JobQueueEntry) (*httptest.Server, *api.Job) {
	t.Helper()
	got := &api.Job{}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/job/{id}/plan", func(w http.ResponseWriter, r *http.Request) {
		var req api.JobRegisterRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil {
			http.Error(w, `{"Error":"bad body"}`, 400)
			return
		}
		*got = *req.Job
		_ = json.NewEncoder(w).Encode(plan)
	})
	mux.HandleFunc("GET /v1/jobs/queue", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(queue)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts, got
}

const planSpec = `job "train" {
  type = "batch"
  group "workers" {
    count = 4
    gang  = true
    task "t" {
      driver = "native"
      resources {
        device "nvidia/gpu" {
          memory = "20 GiB"
        }
      }
    }
  }
}
`

func TestJobPlan(t *testing.T) {
	fits := &api.JobPlanResponse{JobModifyIndex: 42, DiffLines: []string{`~ TaskGroups["workers"].Count: 2 => 4`},
		Groups: []*api.GroupPlan{{Name: "workers", Place: 2, InPlace: 2, Nodes: map[string]int{"gpu-a": 1, "gpu-b": 1}}}}
	waits := &api.JobPlanResponse{Groups: []*api.GroupPlan{{Name: "workers", Queued: 4, Nodes: map[string]int{},
		Failure: &api.AllocMetric{Explanation: "5 nodes: not enough free GPU memory (nvidia/gpu); 2: reserved 'voice'; 1: opportunistic node"}}},
		Preemptions: []string{"low.g[0] on gpu-a"}}
	cases := []struct {
		name  string
		plan  *api.JobPlanResponse
		code  int
		wants []string
	}{
		{"fits", fits, 0, []string{`Job "train" (running version at index 42)`, `~ TaskGroups["workers"].Count: 2 => 4`, "place 2 on gpu-a (1), gpu-b (1)", "update 2 in place"}},
		{"waits", waits, 2, []string{`Job "train" (new)`, "4 would wait: 5 nodes: not enough free GPU memory (nvidia/gpu); 2: reserved 'voice'; 1: opportunistic node", "low.g[0] on gpu-a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts, got := planAPI(t, tc.plan, nil)
			res := runCmd(t, ts.URL, "job", "plan", writeFile(t, "train.hcl", planSpec))
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d: %s %s", res.code, tc.code, res.out, res.err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(res.out, w) {
					t.Fatalf("output lacks %q:\n%s", w, res.out)
				}
			}
			if !got.TaskGroups[0].Gang || got.TaskGroups[0].Tasks[0].Resources.Devices[0].MemoryMB != 20480 {
				t.Fatalf("planned job %+v", got.TaskGroups[0])
			}
		})
	}
	ts, _ := planAPI(t, fits, nil)
	if res := runCmd(t, ts.URL, "job", "plan", "-json", writeFile(t, "train.hcl", planSpec)); res.code != 0 || !strings.Contains(res.stdout+res.out, `"JobModifyIndex": 42`) {
		t.Fatalf("-json: %d %s %s", res.code, res.stdout, res.out)
	}
	if res := runCmd(t, ts.URL, "job", "plan", writeFile(t, "bad.hcl", "job \"x\" {\n  group \"g\" {\n    gang = \"maybe\"\n  }\n}\n")); res.code != 1 || !strings.Contains(res.err, "bad.hcl:3:12") {
		t.Fatalf("bad jobspec: %d %q", res.code, res.err)
	}
	if res := runCmd(t, ts.URL, "job", "plan"); res.code == 0 {
		t.Fatal("job plan without a file succeeded")
	}
}

func TestJobQueue(t *testing.T) {
	q := []*api.JobQueueEntry{
		{JobID: "big", Type: "batch", Priority: 80, SubmitTime: 1764504000e9, Status: "blocked", Queued: map[string]int{"g": 2},
			Reasons: map[string]string{"g": "2 nodes: not enough free devices (nvidia/gpu)"}},
		{JobID: "new", Type: "service", Priority: 50, SubmitTime: 1764504060e9, Status: "pending", Queued: map[string]int{},
			Reasons: map[string]string{"web": "waiting for a scheduler"}},
	}
	ts, _ := planAPI(t, nil, q)
	res := runCmd(t, ts.URL, "job", "queue")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.err)
	}
	lines := strings.Split(strings.TrimSpace(res.out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "big") || !strings.Contains(lines[1], "g: 2") ||
		!strings.Contains(lines[1], "not enough free devices") || !strings.Contains(lines[2], "waiting for a scheduler") {
		t.Fatalf("queue output:\n%s", res.out)
	}
	empty, _ := planAPI(t, nil, []*api.JobQueueEntry{})
	if res := runCmd(t, empty.URL, "job", "queue"); res.code != 0 || !strings.Contains(res.out, "No work waiting") {
		t.Fatalf("empty queue: %d %q", res.code, res.out)
	}
	if res := runCmd(t, ts.URL, "job", "queue", "extra"); res.code == 0 {
		t.Fatal("job queue with an argument succeeded")
	}
}
