package http

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// benchState fills a fake server with jobs jobs (one allocation each,
// every twentieth asking for one more that stays queued with a placement
// failure) on nodes nodes of 8 simulated H100s each.
func benchState(jobs, nodes int) *fakeServer {
	fs := newFakeServer()
	var nodeList []*structs.Node
	for i := 0; i < nodes; i++ {
		n := &structs.Node{ID: fmt.Sprintf("node-%04d-0000-0000-0000-000000000000", i), Name: fmt.Sprintf("gpu-%03d", i),
			Datacenter: "dc1", Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
			Drivers:       map[string]*structs.DriverInfo{"native": {Detected: true, Healthy: true}, "docker": {Detected: true, Healthy: true}},
			NodeResources: &structs.NodeResources{CPU: 64000, Cores: 32, MemoryMB: 512 * 1024}}
		g := &structs.DeviceGroup{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3",
			Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(81559, "MiB")}}
		for k := 0; k < 8; k++ {
			g.Instances = append(g.Instances, &structs.DeviceInstance{ID: fmt.Sprintf("GPU-%04d-%d", i, k), Healthy: true, HealthDescription: "healthy"})
		}
		n.NodeResources.Devices = []*structs.DeviceGroup{g}
		fs.nodes[n.ID] = n
		nodeList = append(nodeList, n)
	}
	now := time.Now().UnixNano()
	for i := 0; i < jobs; i++ {
		count := 1
		if i%20 == 0 {
			count = 2
		}
		job := &structs.Job{ID: fmt.Sprintf("train-%04d", i), Name: fmt.Sprintf("train-%04d", i), Type: structs.JobTypeBatch, Priority: 50,
			Datacenters: []string{"dc1"}, Status: structs.JobStatusRunning, SubmitTime: now, Meta: map[string]string{"team": "vision"},
			TaskGroups: []*structs.TaskGroup{{Name: "trainer", Count: count, Tasks: []*structs.Task{{Name: "main", Driver: "native",
				Resources: &structs.Resources{CPU: 2000, MemoryMB: 8192, Devices: []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: 1}}}}}}}}
		fs.jobs[job.ID] = job
		node := nodeList[i%len(nodeList)]
		a := &structs.Allocation{ID: fmt.Sprintf("%08d-aaaa-bbbb-cccc-000000000000", i), JobID: job.ID, Job: job, TaskGroup: "trainer",
			Name: job.ID + ".trainer[0]", NodeID: node.ID, NodeName: node.Name, DesiredStatus: structs.AllocDesiredStatusRun,
			ClientStatus: structs.AllocClientStatusRunning, CreateTime: now,
			AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{"main": {CPU: 2000, MemoryMB: 8192,
				Devices: []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3",
					DeviceIDs: []string{fmt.Sprintf("GPU-%04d-%d", i%len(nodeList), (i/len(nodeList))%8)}}}}}},
			TaskStates: map[string]*structs.TaskState{"main": {State: structs.TaskStateRunning, StartedAt: now,
				Events: []*structs.TaskEvent{{Type: structs.TaskEventReceived, Time: now}, {Type: structs.TaskEventStarted, Time: now}}}}}
		fs.allocs[a.ID] = a
		ev := &structs.Evaluation{ID: fmt.Sprintf("%08d-eeee-bbbb-cccc-000000000000", i), JobID: job.ID, Status: structs.EvalStatusComplete,
			TriggeredBy: structs.EvalTriggerJobRegister, CreateTime: now, CreateIndex: uint64(i + 1)}
		if count > 1 {
			ev.FailedTGAllocs = map[string]*structs.AllocMetric{"trainer": {NodesEvaluated: nodes, NodesExhausted: nodes,
				DimensionExhausted: map[string]int{"devices: nvidia/gpu": nodes}}}
			ev.QueuedAllocations = map[string]int{"trainer": 1}
		}
		fs.evals[ev.ID] = ev
	}
	return fs
}

// BenchmarkUIPages measures the server time to render each UI page, with
// 1,000 jobs (1,000 allocations, 1,000 evaluations) and 200 nodes of 8
// GPUs in a fake server's state: the handler runs against an httptest
// recorder, so the figure is query + view building + template execution.
// It reports ms/page; the target is under 100 ms.
func BenchmarkUIPages(b *testing.B) {
	fs := benchState(1000, 200)
	h, err := New(Config{Server: fs})
	if err != nil {
		b.Fatal(err)
	}
	pages := []struct{ name, path string }{
		{"jobs", "/ui/jobs"},
		{"job", "/ui/job/train-0000"},
		{"allocation", "/ui/allocation/00000000-aaaa-bbbb-cccc-000000000000"},
		{"nodes", "/ui/nodes"},
		{"servers", "/ui/servers"},
		{"run", "/ui/run"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, p.path, nil)
			var bytes int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, rec.Code, rec.Body.String())
				}
				bytes = rec.Body.Len()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
			b.ReportMetric(float64(bytes)/1024, "KiB/page")
		})
	}
}
