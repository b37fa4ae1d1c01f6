package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// BenchmarkPutToRunning measures, for examples/hello-gpu.hcl on an
// in-process dev agent, the time from sending PUT /v1/jobs to the task's
// start as the client recorded it (TaskState.StartedAt). It reports the
// median of 20 submissions per benchmark iteration as "ms/median".
func BenchmarkPutToRunning(b *testing.B) {
	dir := b.TempDir()
	cfg := agent.DevConfig()
	cfg.DataDir = dir
	cfg.Ports.HTTP = freePort(b)
	cfg.Ports.Raft = freePort(b)
	cfg.LogLevel = "ERROR"
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard}))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Shutdown()
	addr := "http://" + a.HTTPAddr()

	job, err := jobspec.ParseFile(filepath.Join(repoRoot(b), "examples", "hello-gpu.hcl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	const runs = 20
	b.ResetTimer()
	var medians []float64
	for i := 0; i < b.N; i++ {
		var lat []time.Duration
		for r := 0; r < runs; r++ {
			job.ID = fmt.Sprintf("bench-%d-%d", i, r)
			job.Name = job.ID
			body, _ := json.Marshal(map[string]interface{}{"Job": job})
			req, _ := http.NewRequest(http.MethodPut, addr+"/v1/jobs", bytes.NewReader(body))
			sent := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("PUT /v1/jobs: %s", resp.Status)
			}
			started := waitStarted(b, addr, job.ID)
			lat = append(lat, time.Unix(0, started).Sub(sent))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		medians = append(medians, float64(lat[runs/2])/float64(time.Millisecond))
	}
	b.StopTimer()
	sort.Float64s(medians)
	b.ReportMetric(medians[len(medians)/2], "ms/median")
	if os.Getenv("GPULAYER_BENCH_VERBOSE") != "" {
		b.Logf("medians of %d runs: %v ms", runs, medians)
	}
}

// waitStarted polls the job's allocations (blocking queries) until the
// allocation has finished, so the next submission finds its GPU free, and
// returns the task's start time in Unix nanoseconds.
func waitStarted(b *testing.B, addr, jobID string) int64 {
	b.Helper()
	return waitStartedWith(b, http.DefaultClient, addr, jobID)
}
