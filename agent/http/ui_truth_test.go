package http

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// Tests that the UI's figures are the cluster's (issue 11, defect 8):
// queued counts, telemetry, shares, plurals, node state and the log pane
// a failed task opens on.

// uiServer serves fs's pages with client c (nil for none).
func uiServer(t *testing.T, fs *fakeServer, c Client) string {
	t.Helper()
	h, err := New(Config{Server: fs, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, h)
	return ts
}

func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, body := doReq(t, "GET", url, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %.500s", url, resp.StatusCode, body)
	}
	return body
}

// rowOf returns the <tr> of the page whose attribute attr is val.
func rowOf(t *testing.T, body, attr, val string) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<tr ` + regexp.QuoteMeta(attr+`="`+val+`"`) + `>.*?</tr>`)
	m := re.FindString(body)
	if m == "" {
		t.Fatalf("no row %s=%q in page:\n%s", attr, val, body)
	}
	return m
}

// TestUIQueuedDeadBatchJobIsZero: a dead batch job whose only allocation
// failed (no reschedule left) queues nothing; the CLI and the evaluation
// say 0, and the page showed "Queued 1" in bold.
func TestUIQueuedDeadBatchJobIsZero(t *testing.T) {
	fs := newFakeServer()
	job := &structs.Job{ID: "dead-batch", Name: "dead-batch", Type: "batch", Status: structs.JobStatusDead, Priority: 50,
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	fs.jobs[job.ID] = job
	fs.allocs["dead0001"] = &structs.Allocation{ID: "dead0001", JobID: job.ID, Job: job, TaskGroup: "g", NodeID: "node-1",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusFailed, CreateIndex: 10}
	fs.evals["e-place"] = &structs.Evaluation{ID: "e-place", JobID: job.ID, Status: "complete", CreateIndex: 9,
		QueuedAllocations: map[string]int{"g": 0}}
	fs.evals["e-failed"] = &structs.Evaluation{ID: "e-failed", JobID: job.ID, Status: "complete", CreateIndex: 12,
		TriggeredBy: "alloc-failure", QueuedAllocations: map[string]int{"g": 0}}
	// A job that really waits: its newest evaluation queues 2.
	wait := &structs.Job{ID: "waits", Name: "waits", Type: "batch", Status: structs.JobStatusPending, Priority: 50,
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 2, Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	fs.jobs[wait.ID] = wait
	fs.evals["e-wait"] = &structs.Evaluation{ID: "e-wait", JobID: wait.ID, Status: "blocked", CreateIndex: 20,
		QueuedAllocations: map[string]int{"g": 2}}
	base := uiServer(t, fs, nil)

	jobs := getPage(t, base+"/ui/jobs")
	if row := rowOf(t, jobs, "data-job", "dead-batch"); strings.Contains(row, "<strong>") || !strings.Contains(row, `<span class="muted">0</span>`) {
		t.Errorf("dead batch job's row shows queued work:\n%s", row)
	}
	if row := rowOf(t, jobs, "data-job", "waits"); !strings.Contains(row, "<strong>2</strong>") {
		t.Errorf("waiting job's row does not show 2 queued:\n%s", row)
	}
	job1 := getPage(t, base+"/ui/job/dead-batch")
	groups := regexp.MustCompile(`(?s)<section id="job-groups".*?</section>`).FindString(job1)
	if !regexp.MustCompile(`<td>1</td>\s*<td>.*?</td>\s*<td>.*?</td>\s*<td>0</td>`).MatchString(strings.ReplaceAll(groups, "\n", "")) {
		t.Errorf("job page's group does not show Queued 0:\n%s", groups)
	}
}

// gpuFixture is node-1 with one GPU (GPU-aaaa), telemetry of 77 % on it,
// a completed allocation that held it and a running one that holds it now.
func gpuFixture(t *testing.T) (*fakeServer, *statsClient) {
	fs, fc, _ := fixture(t)
	mem := int64(81920)
	fs.nodes["node-1"].NodeResources = &structs.NodeResources{CPU: 4000, MemoryMB: 16384, Devices: []*structs.DeviceGroup{{
		Vendor: "nvidia", Type: "gpu", Name: "H100", Attributes: map[string]*structs.Attribute{"memory": {Int: &mem, Unit: "MiB"}},
		Instances: []*structs.DeviceInstance{{ID: "GPU-aaaa", Healthy: true}}}}}
	job := fs.jobs["hello-gpu"]
	dev := func() *structs.AllocatedResources {
		return &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{"main": {
			Devices: []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-aaaa"}}}}}}
	}
	fs.allocs["done0001"] = &structs.Allocation{ID: "done0001", JobID: job.ID, Job: job, TaskGroup: "gpu", NodeID: "node-1",
		DesiredStatus: "run", ClientStatus: structs.AllocClientStatusComplete, AllocatedResources: dev(), CreateIndex: 5}
	fs.allocs["live0001"] = &structs.Allocation{ID: "live0001", JobID: job.ID, Job: job, TaskGroup: "gpu", NodeID: "node-1",
		DesiredStatus: "run", ClientStatus: structs.AllocClientStatusRunning, AllocatedResources: dev(), CreateIndex: 6}
	sc := &statsClient{fakeClient: *fc, stats: &structs.NodeDeviceStats{NodeID: "node-1", SampledAt: 1, IntervalSeconds: 1,
		Devices: []*structs.DeviceStats{{ID: "GPU-aaaa", Healthy: true, UtilizationPercent: 77, MemoryUsedMiB: 4242, MemoryTotalMiB: 81920}}}}
	return fs, sc
}

// TestUICompletedAllocShowsNoTelemetry: a completed allocation's page
// showed the utilisation and memory of the job that holds its GPU now.
func TestUICompletedAllocShowsNoTelemetry(t *testing.T) {
	fs, sc := gpuFixture(t)
	base := uiServer(t, fs, sc)
	done := getPage(t, base+"/ui/allocation/done0001")
	gpus := regexp.MustCompile(`(?s)<section id="alloc-gpus".*?</section>`).FindString(done)
	if strings.Contains(gpus, "77 %") || strings.Contains(gpus, "4242") {
		t.Errorf("completed allocation shows the GPU's current telemetry:\n%s", gpus)
	}
	if strings.Contains(gpus, "data-stats-node") {
		t.Errorf("completed allocation asks the node for telemetry:\n%s", gpus)
	}
	if !strings.Contains(gpus, "GPU-aaaa") || !strings.Contains(gpus, "released its GPUs") {
		t.Errorf("completed allocation does not say it released GPU-aaaa:\n%s", gpus)
	}
	// The allocation that holds the GPU now shows it.
	live := getPage(t, base+"/ui/allocation/live0001")
	if !strings.Contains(live, "77 %") || !strings.Contains(live, "4242 / 81920 MiB") {
		t.Errorf("running allocation lacks its GPU's telemetry:\n%s", live)
	}
}

// TestUISharedGPURequestSaysShare: a group asking for a 4 GiB share said
// "1× nvidia/gpu".
func TestUISharedGPURequestSaysShare(t *testing.T) {
	fs, _, _ := fixture(t)
	job := &structs.Job{ID: "share", Name: "share", Type: "service", Priority: 50, TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1,
		Tasks: []*structs.Task{{Name: "t", Driver: "native", Resources: &structs.Resources{CPU: 100, MemoryMB: 64,
			Devices: []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 1, MemoryMB: 4096}}}},
			{Name: "u", Driver: "native", Resources: &structs.Resources{CPU: 100, MemoryMB: 64,
				Devices: []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 1, MemoryMB: 1500}, {Name: "apple/gpu", Count: 2}}}}}}}}
	fs.jobs[job.ID] = job
	body := getPage(t, uiServer(t, fs, nil)+"/ui/job/share")
	for _, want := range []string{"4 GiB share of nvidia/gpu", "1500 MiB share of nvidia/gpu", "2× apple/gpu"} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	if strings.Contains(body, "1× nvidia/gpu") {
		t.Errorf("job page calls a share a whole GPU")
	}
}

// TestUINodesPageCountsInWords: one node is "1 node", not "1 nodes".
func TestUINodesPageCountsInWords(t *testing.T) {
	fs, sc := gpuFixture(t)
	fs.allocs["a1b2c3d4-0000"].ClientStatus = structs.AllocClientStatusComplete
	body := getPage(t, uiServer(t, fs, sc)+"/ui/nodes")
	if !strings.Contains(body, "1 node · 1 GPU (1 held)") {
		t.Errorf("summary is not in words:\n%s", regexp.MustCompile(`(?s)<p class="summary">.*?</p>`).FindString(body))
	}
	if !strings.Contains(body, "1 live allocation<") {
		t.Errorf("node line does not say 1 live allocation")
	}
}
