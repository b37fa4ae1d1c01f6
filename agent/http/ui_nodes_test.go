package http

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestUINodePage: /ui/node/{id} shows the node's attributes, class,
// drivers, every GPU with its holder and telemetry, its allocations and
// its drain state; an unknown node is a 404.
func TestUINodePage(t *testing.T) {
	fs, sc := gpuFixture(t)
	n := fs.nodes["node-1"]
	n.NodeClass = "gpu-big"
	n.Datacenter = "dc1"
	n.Status = structs.NodeStatusReady
	n.SchedulingEligibility = structs.NodeSchedulingIneligible
	n.DrainStrategy = &structs.DrainStrategy{Deadline: 3600e9, StartedAt: 1e18, ForceDeadline: 1e18 + 3600e9}
	n.Attributes = map[string]string{"kernel.name": "linux", "cpu.arch": "amd64"}
	n.Meta = map[string]string{"rack": "r7"}
	n.Drivers = map[string]*structs.DriverInfo{
		"native": {Detected: true, Healthy: true},
		"docker": {Detected: false, Healthy: false, HealthDescription: "docker daemon not reachable"},
	}
	base := uiServer(t, fs, sc)
	body := getPage(t, base+"/ui/node/node-1")
	for _, want := range []string{
		"<title>Node laptop", "gpu-big", "dc1",
		`data-node-eligibility="ineligible"`, `data-node-drain="true"`, "draining, deadline 2001-09-09 02:46:40 UTC",
		"kernel.name", "linux", "cpu.arch", "rack", "r7",
		`<tr data-driver="docker">`, "docker daemon not reachable", `<tr data-driver="native">`,
		"GPU-aaaa", "77 %", "4242 MiB",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("node page lacks %q", want)
		}
	}
	// The GPU's holder is the running allocation, not the completed one.
	gpu := rowOf(t, body, "data-gpu", "GPU-aaaa")
	if !strings.Contains(gpu, "/ui/allocation/live0001") || strings.Contains(gpu, "done0001") {
		t.Errorf("GPU row does not name its holder live0001 alone:\n%s", gpu)
	}
	// Every allocation of the node is listed, finished ones too.
	for _, id := range []string{"live0001", "done0001", "a1b2c3d4-0000"} {
		if !strings.Contains(body, `<tr data-alloc="`+id+`">`) {
			t.Errorf("node page lacks allocation %s", id)
		}
	}

	resp, nb := doReq(t, "GET", base+"/ui/node/nope", "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(nb, "not found") {
		t.Errorf("unknown node: status %d: %.300s", resp.StatusCode, nb)
	}
}

// TestUINodesListShowsDrainAndEligibility: the node list says whether
// each node is eligible and whether it drains, and links its page.
func TestUINodesListShowsDrainAndEligibility(t *testing.T) {
	fs, _, _ := fixture(t)
	fs.nodes["node-1"].Status = structs.NodeStatusReady
	fs.nodes["node-1"].SchedulingEligibility = structs.NodeSchedulingIneligible
	fs.nodes["node-1"].DrainStrategy = &structs.DrainStrategy{}
	fs.nodes["node-2"] = &structs.Node{ID: "node-2", Name: "desk", Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible}
	body := getPage(t, uiServer(t, fs, nil)+"/ui/nodes")
	art := func(id string) string {
		m := regexp.MustCompile(`(?s)<article class="node" id="node-` + id + `".*?</article>`).FindString(body)
		if m == "" {
			t.Fatalf("no article for %s", id)
		}
		return m
	}
	one, two := art("node-1"), art("node-2")
	for _, want := range []string{`data-node-eligibility="ineligible"`, `data-node-drain="true"`, "draining, no deadline", `href="/ui/node/node-1"`} {
		if !strings.Contains(one, want) {
			t.Errorf("draining node lacks %q:\n%s", want, one)
		}
	}
	if !strings.Contains(two, `data-node-eligibility="eligible"`) || strings.Contains(two, "data-node-drain") {
		t.Errorf("eligible node shows wrong state:\n%s", two)
	}
	if !strings.Contains(body, "2 nodes ·") {
		t.Errorf("summary does not say 2 nodes")
	}
}

// TestUIFailedAllocLogOpensOnStderr: a failed task's log pane opens on
// stderr when stderr holds something (the error is there), on stdout
// when stderr is empty, and leaves the choice to the script (prefer
// stderr) when the logs are on another agent's node.
func TestUIFailedAllocLogOpensOnStderr(t *testing.T) {
	fs, fc, _ := fixture(t)
	job := fs.jobs["hello-gpu"]
	failed := func(id, node string) *structs.Allocation {
		return &structs.Allocation{ID: id, JobID: job.ID, Job: job, TaskGroup: "gpu", NodeID: node, DesiredStatus: "run",
			ClientStatus: structs.AllocClientStatusFailed,
			TaskStates:   map[string]*structs.TaskState{"main": {State: structs.TaskStateDead, Failed: true}}}
	}
	fs.allocs["fail-err"] = failed("fail-err", "node-1")
	fs.allocs["fail-noerr"] = failed("fail-noerr", "node-1")
	fs.allocs["fail-remote"] = failed("fail-remote", "node-9")
	fs.allocs["ok-run"] = &structs.Allocation{ID: "ok-run", JobID: job.ID, Job: job, TaskGroup: "gpu", NodeID: "node-1", DesiredStatus: "run",
		ClientStatus: structs.AllocClientStatusRunning, TaskStates: map[string]*structs.TaskState{"main": {State: structs.TaskStateRunning}}}
	fc.logs["fail-err/main/stdout"] = "starting\n"
	fc.logs["fail-err/main/stderr"] = "panic: no GPU\n"
	fc.logs["fail-noerr/main/stdout"] = "exit 3\n"
	fc.logs["fail-noerr/main/stderr"] = ""
	fc.logs["ok-run/main/stderr"] = "warning\n"
	base := uiServer(t, fs, fc)
	pane := func(id string) string {
		body := getPage(t, base+"/ui/allocation/"+id)
		m := regexp.MustCompile(`<pre class="log"[^>]*>`).FindString(body)
		if m == "" {
			t.Fatalf("%s: no log pane", id)
		}
		pressed := regexp.MustCompile(`data-type="(\w+)" aria-pressed="true"`).FindStringSubmatch(body)
		if pressed == nil {
			t.Fatalf("%s: no pressed log button", id)
		}
		return m + " pressed=" + pressed[1]
	}
	cases := []struct{ id, want, not string }{
		{"fail-err", `data-log-type="stderr" tabindex="0"> pressed=stderr`, "data-log-prefer"},
		{"fail-noerr", `data-log-type="stdout" tabindex="0"> pressed=stdout`, "data-log-prefer"},
		{"fail-remote", `data-log-type="stdout" data-log-prefer="stderr" tabindex="0"> pressed=stdout`, ""},
		{"ok-run", `data-log-type="stdout" tabindex="0"> pressed=stdout`, "data-log-prefer"},
	}
	for _, tc := range cases {
		got := pane(tc.id)
		if !strings.Contains(got, tc.want) || tc.not != "" && strings.Contains(got, tc.not) {
			t.Errorf("%s: log pane %s, want %s", tc.id, got, tc.want)
		}
	}
}
