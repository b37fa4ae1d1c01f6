package command

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// fakeAPI serves canned API objects the way an agent would, and records the
// requests it got.
type fakeAPI struct {
	mu     sync.Mutex
	jobs   map[string]*api.Job
	allocs map[string]*api.Allocation
	nodes  map[string]*api.Node
	// evalSteps is what successive GETs of an evaluation return; the last
	// step repeats.
	evalSteps map[string][]*api.Evaluation
	evalCalls map[string]int
	jobEvals  map[string][]*api.Evaluation
	logs      map[string]string
	// registered is the last job registered; registerEval the eval ID its
	// registration answers.
	registered *api.Job
	// dispatchChild is the job ID a dispatch answers, without an
	// evaluation.
	dispatchChild string
	registerEval  string
	purged        bool
	requests      []string
	// downAfterLogs makes the server stop listening once it has sent a
	// log, as an agent that shuts down mid-stream: later requests are
	// refused.
	downAfterLogs bool
}

func i64(v int64) *int64 { return &v }

// newFakeAPI returns a cluster of one node with two GPUs, one running job
// holding one of them, and a completed evaluation.
func newFakeAPI() *fakeAPI {
	const t0 = int64(1764504000) * 1e9 // 2025-11-30T12:00:00Z
	job := &api.Job{ID: "hello-gpu", Name: "hello-gpu", Type: "batch", Priority: 50, Datacenters: []string{"dc1"},
		Status: "running", SubmitTime: t0,
		TaskGroups: []*api.TaskGroup{{Name: "gpu", Count: 1, Tasks: []*api.Task{{Name: "main", Driver: "native"}}}}}
	alloc := &api.Allocation{
		ID: "abcd1234-5678-90ab-cdef-111111111111", EvalID: "1a2b3c4d-0000-0000-0000-000000000000", Name: "hello-gpu.gpu[0]",
		NodeID: "ef567890-0000-0000-0000-000000000000", NodeName: "laptop", JobID: "hello-gpu", Job: job, TaskGroup: "gpu",
		DesiredStatus: "run", ClientStatus: "running", ClientDescription: "Tasks are running",
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"main": {Cpu: api.AllocatedCpuResources{CpuShares: 500}, Memory: api.AllocatedMemoryResources{MemoryMB: 256}, Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3", DeviceIDs: []string{"GPU-aaaa"}}}},
		}},
		TaskStates: map[string]*api.TaskState{"main": {State: "running", StartedAt: time.Unix(0, t0+2e9), Events: []*api.TaskEvent{
			{Type: "Received", Time: t0 + 1e9, DisplayMessage: "Task received by client"},
			{Type: "Started", Time: t0 + 2e9, DisplayMessage: "Task started by client"},
		}}},
		CreateIndex: 10, CreateTime: t0 + 1e9, ModifyTime: t0 + 2e9,
	}
	old := &api.Allocation{ID: "abcd9999-0000-0000-0000-000000000000", EvalID: "00000000-0000", Name: "hello-gpu.gpu[0]",
		NodeID: alloc.NodeID, JobID: "hello-gpu", Job: job, TaskGroup: "gpu", DesiredStatus: "stop", ClientStatus: "complete",
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"main": {Cpu: api.AllocatedCpuResources{CpuShares: 500}, Memory: api.AllocatedMemoryResources{MemoryMB: 256}, Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3", DeviceIDs: []string{"GPU-bbbb"}}}},
		}},
		CreateIndex: 5, CreateTime: t0}
	node := &api.Node{ID: "ef567890-0000-0000-0000-000000000000", Name: "laptop", Datacenter: "dc1", HTTPAddr: "127.0.0.1:4656",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64"},
		Drivers:    map[string]*api.DriverInfo{"native": {Detected: true, Healthy: true}, "docker": {Detected: false}},
		NodeResources: &api.NodeResources{Cpu: api.NodeCpuResources{CpuShares: 16000, TotalCpuCores: 8}, Memory: api.NodeMemoryResources{MemoryMB: 32768}, Devices: []*api.DeviceGroup{{
			Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3",
			Attributes: map[string]*api.Attribute{"memory": {Int: i64(81559), Unit: "MiB"}},
			Instances:  []*api.DeviceInstance{{ID: "GPU-aaaa", Healthy: true}, {ID: "GPU-bbbb", Healthy: true}, {ID: "GPU-cccc", Healthy: false, HealthDescription: "Xid 79"}},
		}}},
		ReservedResources: &api.NodeReservedResources{Cpu: api.NodeReservedCpuResources{CpuShares: 500}, Memory: api.NodeReservedMemoryResources{MemoryMB: 1024}},
		Status:            "ready", SchedulingEligibility: "eligible"}
	eval := &api.Evaluation{ID: alloc.EvalID, JobID: "hello-gpu", Status: "complete", TriggeredBy: "job-register", CreateIndex: 9,
		QueuedAllocations: map[string]int{"gpu": 0}}
	return &fakeAPI{
		jobs:      map[string]*api.Job{job.ID: job},
		allocs:    map[string]*api.Allocation{alloc.ID: alloc, old.ID: old},
		nodes:     map[string]*api.Node{node.ID: node},
		evalSteps: map[string][]*api.Evaluation{eval.ID: {eval}},
		evalCalls: map[string]int{},
		jobEvals:  map[string][]*api.Evaluation{job.ID: {eval}},
		logs:      map[string]string{alloc.ID + "/main/stdout": "hello from the GPU\n", alloc.ID + "/main/stderr": "a warning\n"},
	}
}

func (f *fakeAPI) serve(t *testing.T) *httptest.Server {
	t.Helper()
	var ts *httptest.Server
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v interface{}) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(api.HeaderIndex, "100")
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := func(w http.ResponseWriter, what string) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": what + " not found"})
	}
	withPrefix := func(ids []string, r *http.Request) []string {
		var out []string
		for _, id := range ids {
			if strings.HasPrefix(id, r.URL.Query().Get("prefix")) {
				out = append(out, id)
			}
		}
		return out
	}
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.JobListStub{}
		for _, id := range withPrefix(sortedKeys(f.jobs), r) {
			j := f.jobs[id]
			out = append(out, &api.JobListStub{ID: j.ID, ParentID: j.ParentID, Name: j.Name, Datacenters: j.Datacenters,
				Type: j.Type, Priority: j.Priority, Periodic: j.Periodic != nil, ParameterizedJob: j.ParameterizedJob != nil,
				Held: j.Held, Stop: j.Stop, Status: j.Status, SubmitTime: j.SubmitTime})
		}
		reply(w, out)
	})
	mux.HandleFunc("PUT /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var req api.JobRegisterRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil {
			w.WriteHeader(400)
			return
		}
		f.mu.Lock()
		f.registered = req.Job
		f.mu.Unlock()
		reply(w, api.JobRegisterResponse{EvalID: f.registerEval, Index: 11})
	})
	mux.HandleFunc("GET /v1/job/{id}", func(w http.ResponseWriter, r *http.Request) {
		if j, ok := f.jobs[r.PathValue("id")]; ok {
			reply(w, j)
			return
		}
		notFound(w, "job")
	})
	mux.HandleFunc("PUT /v1/job/{id}/dispatch", func(w http.ResponseWriter, r *http.Request) {
		// The child f.dispatchChild, created or found by its token
		// before; held or existing children get no evaluation.
		c, ok := f.jobs[f.dispatchChild]
		if !ok || c.ParentID != r.PathValue("id") {
			notFound(w, "job")
			return
		}
		reply(w, api.JobDispatchResponse{DispatchedJobID: c.ID, JobCreateIndex: 20})
	})
	mux.HandleFunc("DELETE /v1/job/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.purged = r.URL.Query().Get("purge") == "true"
		f.mu.Unlock()
		reply(w, api.JobDeregisterResponse{EvalID: f.registerEval, Index: 12})
	})
	mux.HandleFunc("GET /v1/job/{id}/allocations", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.Allocation{}
		for _, id := range sortedKeys(f.allocs) {
			if f.allocs[id].JobID == r.PathValue("id") {
				out = append(out, f.allocs[id])
			}
		}
		reply(w, out)
	})
	mux.HandleFunc("GET /v1/job/{id}/evaluations", func(w http.ResponseWriter, r *http.Request) {
		out := f.jobEvals[r.PathValue("id")]
		if out == nil {
			out = []*api.Evaluation{}
		}
		reply(w, out)
	})
	mux.HandleFunc("GET /v1/allocations", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.Allocation{}
		for _, id := range withPrefix(sortedKeys(f.allocs), r) {
			out = append(out, f.allocs[id])
		}
		reply(w, out)
	})
	mux.HandleFunc("GET /v1/allocation/{id}", func(w http.ResponseWriter, r *http.Request) {
		if a, ok := f.allocs[r.PathValue("id")]; ok {
			reply(w, a)
			return
		}
		notFound(w, "allocation")
	})
	mux.HandleFunc("GET /v1/evaluation/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		steps := f.evalSteps[r.PathValue("id")]
		n := f.evalCalls[r.PathValue("id")]
		f.evalCalls[r.PathValue("id")]++
		f.mu.Unlock()
		if len(steps) == 0 {
			notFound(w, "evaluation")
			return
		}
		if n >= len(steps) {
			n = len(steps) - 1
		}
		w.Header().Set(api.HeaderIndex, fmt.Sprint(100+n))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(steps[n])
	})
	mux.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		out := []*api.Node{}
		for _, id := range withPrefix(sortedKeys(f.nodes), r) {
			out = append(out, f.nodes[id])
		}
		reply(w, out)
	})
	mux.HandleFunc("GET /v1/node/{id}", func(w http.ResponseWriter, r *http.Request) {
		if n, ok := f.nodes[r.PathValue("id")]; ok {
			reply(w, n)
			return
		}
		notFound(w, "node")
	})
	mux.HandleFunc("GET /v1/client/fs/logs/{alloc}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("plain") != "true" {
			w.WriteHeader(400)
			return
		}
		s, ok := f.logs[r.PathValue("alloc")+"/"+q.Get("task")+"/"+q.Get("type")]
		if !ok {
			notFound(w, "task")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		if f.downAfterLogs {
			// Do not keep this connection for the next request.
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, s)
		if f.downAfterLogs {
			_ = ts.Listener.Close()
		}
	})
	ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

func (f *fakeAPI) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}
