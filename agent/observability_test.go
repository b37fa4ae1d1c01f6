package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/gpulayer/gpulayer/structs"
)

// runHelloGPU submits examples/hello-gpu.hcl as jobID and waits for its
// allocation to complete.
func runHelloGPU(t *testing.T, base, jobID string) {
	t.Helper()
	job, err := jobspec.ParseFile(filepath.Join(repoRoot(t), "examples", "hello-gpu.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	job.ID, job.Name = jobID, jobID
	body, _ := json.Marshal(map[string]interface{}{"Job": job})
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/jobs", strings.NewReader(string(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /v1/jobs: %s", resp.Status)
	}
	deadline := time.Now().Add(60 * time.Second)
	var index uint64
	for time.Now().Before(deadline) {
		resp, err := http.Get(fmt.Sprintf("%s/v1/job/%s/allocations?index=%d&wait=5s", base, jobID, index))
		if err != nil {
			t.Fatal(err)
		}
		var allocs []*api.Allocation
		err = json.NewDecoder(resp.Body).Decode(&allocs)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Sscan(resp.Header.Get("X-Gpulayer-Index"), &index)
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusComplete {
				return
			}
			if a.ClientTerminalStatus() {
				t.Fatalf("allocation %s ended %s", a.ID, a.ClientStatus)
			}
		}
	}
	t.Fatalf("job %s did not complete", jobID)
}

// scrape reads /v1/metrics and parses the text format.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/v1/metrics?format=prometheus")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

// series returns the value of the family's series whose labels include
// want (a histogram gives its sample count), and whether there is one.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsAfterJobRuns(t *testing.T) {
	base := startUIAgent(t)
	runHelloGPU(t, base, "metrics-demo")

	var fams map[string]*dto.MetricFamily
	// GPU telemetry starts with the client; wait for its first sample.
	deadline := time.Now().Add(15 * time.Second)
	for {
		fams = scrape(t, base)
		if _, ok := series(fams, "gpulayer_gpu_utilization_percent", map[string]string{"simulated": "true"}); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	checks := []struct {
		name    string
		labels  map[string]string
		atLeast float64
	}{
		{"gpulayer_scheduling_duration_seconds", map[string]string{"result": "ok"}, 1},
		{"gpulayer_placements_total", nil, 1},
		{"gpulayer_raft_apply_duration_seconds", map[string]string{"type": "JobRegister"}, 1},
		{"gpulayer_raft_commit_duration_seconds", nil, 1},
		{"gpulayer_raft_fsm_apply_duration_seconds", nil, 1},
		{"gpulayer_raft_leader_changes_total", nil, 0},
		{"gpulayer_raft_is_leader", nil, 1},
		{"gpulayer_broker_evals", map[string]string{"state": "ready"}, 0},
		{"gpulayer_plan_queue_depth", nil, 0},
		{"gpulayer_allocations", map[string]string{"client_status": "complete"}, 1},
		{"gpulayer_nodes", map[string]string{"status": "ready"}, 1},
		{"gpulayer_jobs", map[string]string{"status": "dead"}, 1},
		{"gpulayer_gpu_utilization_percent", map[string]string{"simulated": "true", "model": "Simulated NVIDIA GPU"}, 0},
		{"gpulayer_gpu_memory_used_mib", map[string]string{"simulated": "true"}, 0},
		{"gpulayer_gpu_memory_total_mib", map[string]string{"simulated": "true"}, 81920},
		{"gpulayer_http_request_duration_seconds", map[string]string{"route": "PUT /v1/jobs", "code": "200"}, 1},
	}
	for _, c := range checks {
		v, ok := series(fams, c.name, c.labels)
		if !ok {
			t.Errorf("no series %s%v", c.name, c.labels)
			continue
		}
		if v < c.atLeast {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.atLeast)
		}
	}
}

// streamLine is one line of /v1/event/stream.
type streamLine struct {
	Index  uint64
	Events []*streamEvent
	Error  string
}

// streamEvent is one event of a streamLine, its payload in the wire
// shapes a user reads.
type streamEvent struct {
	Topic, Type, Key string
	FilterKeys       []string
	Index            uint64
	Payload          struct {
		Job        *api.Job
		Allocation *api.Allocation
		Node       *api.Node
		Evaluation *api.Evaluation
	}
}

// readStream reads /v1/event/stream?index=from until it has seen a batch
// at or after until (or, with until zero, until stop returns true), and
// returns the batches.
func readStream(t *testing.T, base string, from uint64, query string, stop func(b streamLine) bool) []streamLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/event/stream?index=%d%s", base, from, query), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %s", resp.Status)
	}
	var out []streamLine
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l streamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		if l.Error != "" {
			t.Fatalf("stream error: %s", l.Error)
		}
		if l.Index == 0 {
			continue // heartbeat
		}
		out = append(out, l)
		if stop(l) {
			return out
		}
	}
	t.Fatalf("stream ended after %d batches: %v", len(out), sc.Err())
	return nil
}

func TestEventStreamResumesWithoutGapsOrDuplicates(t *testing.T) {
	base := startUIAgent(t)
	runHelloGPU(t, base, "events-one")
	runHelloGPU(t, base, "events-two")

	complete := func(jobID string) func(streamLine) bool {
		return func(l streamLine) bool {
			for _, e := range l.Events {
				if e.Topic == structs.TopicAllocation && e.Payload.Allocation != nil && e.Payload.Allocation.JobID == jobID &&
					e.Payload.Allocation.ClientStatus == structs.AllocClientStatusComplete {
					return true
				}
			}
			return false
		}
	}
	// The whole history, up to the second job's completion.
	all := readStream(t, base, 1, "", complete("events-two"))
	if len(all) < 6 {
		t.Fatalf("only %d batches", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Index <= all[i-1].Index {
			t.Fatalf("batch %d index %d after %d: out of order or duplicated", i, all[i].Index, all[i-1].Index)
		}
	}
	key := func(l streamLine) string {
		var parts []string
		for _, e := range l.Events {
			parts = append(parts, fmt.Sprintf("%d/%s/%s/%s", e.Index, e.Topic, e.Type, e.Key))
		}
		return strings.Join(parts, ",")
	}
	// Resume from several cut points: each stream is exactly the tail.
	last := all[len(all)-1].Index
	for _, cut := range []int{0, len(all) / 3, len(all) / 2, len(all) - 2} {
		from := all[cut].Index
		got := readStream(t, base, from, "", func(l streamLine) bool { return l.Index >= last })
		want := all[cut+1:]
		if len(got) != len(want) {
			t.Fatalf("resume from %d: %d batches, want %d", from, len(got), len(want))
		}
		for i := range want {
			if key(got[i]) != key(want[i]) {
				t.Fatalf("resume from %d, batch %d:\n got %s\nwant %s", from, i, key(got[i]), key(want[i]))
			}
		}
	}
	// A topic filter keeps only the job's events, matched by key or by
	// the job ID of allocations and evaluations.
	jobOnly := readStream(t, base, 1, "&topic=Job:events-one&topic=Allocation:events-one&topic=Evaluation:events-one", complete("events-one"))
	for _, l := range jobOnly {
		for _, e := range l.Events {
			if e.Key != "events-one" && (len(e.FilterKeys) == 0 || e.FilterKeys[0] != "events-one") {
				t.Fatalf("filtered stream has %s %s", e.Topic, e.Key)
			}
		}
	}

	// Bad parameters are refused before the stream starts.
	for _, q := range []string{"index=x", "topic=Jobs", "topic=Job:"} {
		resp, err := http.Get(base + "/v1/event/stream?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %s, want 400", q, resp.Status)
		}
	}
}
