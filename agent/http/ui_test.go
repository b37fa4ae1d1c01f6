package http

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// xssText is job-provided text that must render as text on every page.
const xssText = `<script>alert(1)</script>"'&`

// xssFixture adds a job whose name, meta, group, status description,
// evaluation and node carry markup.
func xssFixture(t *testing.T) (*fakeServer, string) {
	fs, _, ts := fixture(t)
	job := &structs.Job{ID: "xss", Name: xssText, Type: "service", Priority: 50, Status: "pending",
		StatusDescription: xssText, Meta: map[string]string{"note": xssText, xssText: "key"},
		TaskGroups: []*structs.TaskGroup{{Name: "web", Count: 2, Tasks: []*structs.Task{{Name: "main", Driver: "native",
			Resources: &structs.Resources{CPU: 100, MemoryMB: 64, Devices: []*structs.RequestedDevice{{Name: xssText, Count: 1}}}}}}}}
	fs.jobs[job.ID] = job
	fs.allocs["f00dfeed-1111"] = &structs.Allocation{ID: "f00dfeed-1111", JobID: job.ID, Job: job, TaskGroup: "web", NodeID: "node-1",
		NodeName: xssText, ClientStatus: "running", DesiredStatus: "run", ClientDescription: xssText,
		TaskStates: map[string]*structs.TaskState{"main": {State: "running", Events: []*structs.TaskEvent{{Type: xssText, Message: xssText}}}}}
	fs.evals["e-xss"] = &structs.Evaluation{ID: "e-xss", JobID: job.ID, Status: "blocked", StatusDescription: xssText,
		QueuedAllocations: map[string]int{"web": 1},
		FailedTGAllocs:    map[string]*structs.AllocMetric{"web": {NodesEvaluated: 1, NodesExhausted: 1, DimensionExhausted: map[string]int{xssText: 1}}}}
	fs.nodes["node-1"].Name = xssText
	return fs, ts.URL
}

func TestUIPagesRenderAndEscape(t *testing.T) {
	_, base := xssFixture(t)
	pages := []struct {
		path, title string
		want        []string
	}{
		{"/ui/jobs", "Jobs", []string{"hello-gpu", "xss", "web: not enough"}},
		{"/ui/", "Jobs", []string{"hello-gpu"}},
		{"/ui/job/xss", "Job xss", []string{"Task groups", "Evaluations and placement", "nodes evaluated", "Stop job", "f00dfeed"}},
		{"/ui/allocation/f00dfeed-1111", "Allocation f00dfeed", []string{"Assigned GPUs", `data-log-task="main"`}},
		{"/ui/nodes", "Nodes", []string{"node-1"}},
		{"/ui/node/node-1", "Node ", []string{"node-1", "Drivers", "Attributes"}},
		{"/ui/servers", "Servers", []string{"127.0.0.1:4657", "leader"}},
		{"/ui/run", "Run a job", []string{`job &#34;hello-gpu&#34;`, "Plan"}},
	}
	for _, p := range pages {
		t.Run(p.path, func(t *testing.T) {
			resp, body := doReq(t, "GET", base+p.path, "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("CSP %q", csp)
			}
			if !strings.Contains(body, "<title>"+p.title) {
				t.Errorf("no title %q", p.title)
			}
			for _, w := range p.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if strings.Contains(body, "<script>alert") {
				t.Fatalf("job text rendered as markup:\n%s", body)
			}
			if strings.Contains(p.path, "xss") || p.path == "/ui/jobs" || strings.HasPrefix(p.path, "/ui/node") {
				if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
					t.Errorf("escaped job text missing")
				}
			}
		})
	}
}

func TestUIErrorsAndStatic(t *testing.T) {
	_, _, ts := fixture(t)
	cases := []struct {
		path     string
		wantCode int
		want     string
	}{
		{"/ui/job/nope", 404, "not found"},
		{"/ui/allocation/nope", 404, "not found"},
		{"/ui/node/nope", 404, "not found"},
		{"/ui/nothing-here", 404, "No page at /ui/nothing-here"},
		{"/ui/static/app.js", 200, "streamEvents"},
		{"/ui/static/style.css", 200, "table-wrap"},
		{"/", 200, "<title>Jobs"}, // redirected to /ui/
	}
	for _, tc := range cases {
		resp, body := doReq(t, "GET", ts.URL+tc.path, "")
		if resp.StatusCode != tc.wantCode || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want %d with %q: %.300s", tc.path, resp.StatusCode, tc.wantCode, tc.want, body)
		}
	}
}

func TestClientStatsRoute(t *testing.T) {
	_, _, ts := fixture(t)
	// The fake client samples no GPUs: the route says there is no client
	// telemetry rather than inventing some.
	resp, body := doReq(t, "GET", ts.URL+"/v1/client/stats", "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no client") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}

func TestUIRestartButtonFollowsTheRoute(t *testing.T) {
	fs, _ := xssFixture(t)
	hh, err := New(Config{Server: fs})
	if err != nil {
		t.Fatal(err)
	}
	h := hh.(*handler)
	// Start from the UI routes alone, whatever restart routes this build
	// has, then add one.
	h.mux = newRouteMux()
	if err := h.uiRoutes(); err != nil {
		t.Fatal(err)
	}
	get := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/job/xss", nil))
		return rec.Body.String()
	}
	if strings.Contains(get(), `data-action="restart-alloc"`) {
		t.Fatal("restart button without a restart route")
	}
	h.mux.HandleFunc("POST /v1/client/allocation/{id}/restart", func(w http.ResponseWriter, r *http.Request) {})
	if body := get(); !strings.Contains(body, `data-method="POST" data-path="/v1/client/allocation/{id}/restart"`) {
		t.Fatalf("no restart button for the running allocation:\n%s", body)
	}
}
