package convert

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestReadsInNomadShapes: the JSON of every read has Nomad's shapes:
// nested Cpu and Memory, RFC 3339 task and evaluation times, device
// Locality as {PciBusID}, and the region, node pool and namespace
// defaults; GPUlayer's extras are added fields.
func TestReadsInNomadShapes(t *testing.T) {
	started := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	job := &structs.Job{ID: "j", Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g"}, {Name: "idle"}}}
	node := &structs.Node{ID: "n", HTTPAddr: "10.0.0.5:4656", Reserved: []string{"voice"}, MemoryModel: "unified",
		NodeResources: &structs.NodeResources{CPU: 16000, Cores: 8, MemoryMB: 32768, Devices: []*structs.DeviceGroup{{
			Vendor: "nvidia", Type: "gpu", Name: "H100", Instances: []*structs.DeviceInstance{{ID: "GPU-a", Healthy: true, Locality: "0000:01:00.0"}, {ID: "GPU-b"}}}}},
		ReservedResources: &structs.NodeReservedResources{CPU: 500, MemoryMB: 1024}}
	alloc := &structs.Allocation{ID: "a", JobID: "j", Job: job, TaskGroup: "g", ClientStatus: "running",
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			"t": {CPU: 100, MemoryMB: 32, Devices: []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-a"}, MemoryMB: 2048}}}}},
		TaskStates: map[string]*structs.TaskState{"t": {State: "running", Restarts: 1, StartedAt: started.UnixNano(),
			Events: []*structs.TaskEvent{{Type: structs.TaskEventRestarting, Time: started.Add(-time.Second).UnixNano()}}}}}
	eval := &structs.Evaluation{ID: "e", JobID: "j", WaitUntil: started.UnixNano()}

	cases := []struct {
		name string
		v    interface{}
		want []string
	}{
		{"job", JobRead(job, ""), []string{`"Region":"global"`, `"NodePool":"default"`, `"Namespace":"default"`}},
		{"node", NodeRead(node), []string{`"Cpu":{"CpuShares":16000,"TotalCpuCores":8}`, `"Memory":{"MemoryMB":32768}`,
			`"Locality":{"PciBusID":"0000:01:00.0"}`, `"ReservedResources":{"Cpu":{"CpuShares":500},"Memory":{"MemoryMB":1024}}`,
			`"ReservedCapabilities":["voice"]`, `"NodePool":"default"`}},
		{"node stub", NodeListStub(node), []string{`"Address":"10.0.0.5"`, `"Cpu":{"CpuShares":16000`}},
		{"alloc", AllocRead(alloc, "eu", true), []string{`"Cpu":{"CpuShares":100}`, `"Memory":{"MemoryMB":32}`,
			`"StartedAt":"2026-12-01T12:00:00Z"`, `"LastRestart":"2026-12-01T11:59:59Z"`, `"FinishedAt":"0001-01-01T00:00:00Z"`,
			`"Region":"eu"`, `"JobType":"batch"`, `"DeviceIDs":["GPU-a"],"MemoryMB":2048`}},
		{"alloc stub", AllocRead(alloc, "", false), []string{`"Job":null`}},
		{"eval", EvalRead(eval), []string{`"WaitUntil":"2026-12-01T12:00:00Z"`, `"Namespace":"default"`}},
		{"eval without wait", EvalRead(&structs.Evaluation{ID: "e2"}), []string{`"WaitUntil":"0001-01-01T00:00:00Z"`}},
		{"summary", JobSummary(job, []*structs.Allocation{alloc, {TaskGroup: "g", ClientStatus: "failed"}}),
			[]string{`"g":{"Queued":0,"Complete":0,"Failed":1,"Running":1,"Starting":0,"Lost":0,"Unknown":0}`, `"idle":{"Queued":0`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("%s lacks %s", b, w)
				}
			}
		})
	}
}

// TestPlanRead: the plan answer carries Nomad's Annotations and Diff
// beside GPUlayer's lines.
func TestPlanRead(t *testing.T) {
	p := PlanRead("j", &structs.JobPlanResponse{JobModifyIndex: 7, Diff: []string{"~ Count: 1 => 2"},
		Groups: []*structs.GroupPlan{{Name: "g", Place: 1, Failure: &structs.AllocMetric{NodesEvaluated: 2}}}})
	if u := p.Annotations.DesiredTGUpdates["g"]; u == nil || u.Place != 1 {
		t.Errorf("annotations %+v", p.Annotations)
	}
	if p.Diff.Type != "Edited" || p.Diff.TaskGroups[0].Updates["create"] != 1 || p.DiffLines[0] != "~ Count: 1 => 2" {
		t.Errorf("diff %+v lines %v", p.Diff, p.DiffLines)
	}
	if p.FailedTGAllocs["g"] == nil || p.FailedTGAllocs["g"].NodesEvaluated != 2 {
		t.Errorf("failed %+v", p.FailedTGAllocs)
	}
	if PlanRead("j", &structs.JobPlanResponse{}).Diff.Type != "Added" {
		t.Error("a new job's diff is not Added")
	}
}
